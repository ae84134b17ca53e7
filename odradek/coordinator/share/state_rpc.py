"""The share coordinator's state RPCs as values: one share-partition per request, as Kafka's
PersisterStateManager sends them.

``REQUESTS[operation](group_id, topic_id, partition, *args)`` gives ``(api_key, request,
parse)``: the request body for the inter-broker call and how to read its response into the
Persister's answer (``persister.py``). The ``*_response`` functions build the response bodies the
broker's handlers (``server/handlers/share_group_state.py``) send for one share-partition.
"""

from __future__ import annotations

from odradek.coordinator.inter_broker import error_code_of
from odradek.coordinator.share.persister import PersisterStateBatch, ShareGroupState, ShareStateSummary
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated import (
    delete_share_group_state_request as dreq,
    delete_share_group_state_response as dres,
    initialize_share_group_state_request as ireq,
    initialize_share_group_state_response as ires,
    read_share_group_state_request as rreq,
    read_share_group_state_response as rres,
    read_share_group_state_summary_request as sreq,
    read_share_group_state_summary_response as sres,
    write_share_group_state_request as wreq,
    write_share_group_state_response as wres,
)


def version_for(conn, api_key: int) -> int | None:
    """The highest version of ``api_key`` both this codec and the peer (its ApiVersions) serve."""
    from odradek.protocol.generated import APIS

    theirs = conn.broker_versions.get(api_key)
    ours = APIS[api_key][3], APIS[api_key][4]
    if theirs is None or theirs[1] < ours[0] or theirs[0] > ours[1]:
        return None
    return min(theirs[1], ours[1])


def _first(response):
    """The one partition result of a response (None when the response has none)."""
    for result in response.results:
        for p in result.partitions:
            return p
    return None


def _error(p):
    from odradek.protocol.generated.error_codes import ErrorCode
    return ErrorCode.UNKNOWN_SERVER_ERROR if p is None else error_code_of(p.error_code)


def _initialize(group_id, topic_id, partition, state_epoch, start_offset):
    body = ireq.InitializeShareGroupStateRequest(group_id=group_id, topics=[ireq.InitializeStateData(
        topic_id=topic_id, partitions=[ireq.PartitionData(partition=partition, state_epoch=state_epoch,
                                                          start_offset=start_offset)])])
    return ApiKey.INITIALIZE_SHARE_GROUP_STATE, body, lambda r: _error(_first(r))


def _write(group_id, topic_id, partition, state_epoch, leader_epoch, start_offset, batches,
           delivery_complete_count=-1):
    """WriteShareGroupState; DeliveryCompleteCount goes out at v1 (a v0 peer drops it)."""
    wire = [wreq.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
                            delivery_count=b.delivery_count) for b in batches]
    body = wreq.WriteShareGroupStateRequest(group_id=group_id, topics=[wreq.WriteStateData(
        topic_id=topic_id, partitions=[wreq.PartitionData(partition=partition, state_epoch=state_epoch,
                                                          leader_epoch=leader_epoch, start_offset=start_offset,
                                                          delivery_complete_count=delivery_complete_count,
                                                          state_batches=wire)])])
    return ApiKey.WRITE_SHARE_GROUP_STATE, body, lambda r: _error(_first(r))


def _delete(group_id, topic_id, partition):
    body = dreq.DeleteShareGroupStateRequest(group_id=group_id, topics=[dreq.DeleteStateData(
        topic_id=topic_id, partitions=[dreq.PartitionData(partition=partition)])])
    return ApiKey.DELETE_SHARE_GROUP_STATE, body, lambda r: _error(_first(r))


def _read(group_id, topic_id, partition, leader_epoch):
    body = rreq.ReadShareGroupStateRequest(group_id=group_id, topics=[rreq.ReadStateData(
        topic_id=topic_id, partitions=[rreq.PartitionData(partition=partition, leader_epoch=leader_epoch)])])

    def parse(response) -> ShareGroupState:
        p = _first(response)
        error = _error(p)
        if p is None or error != 0:
            return ShareGroupState(error, 0, -1, ())
        batches = tuple(PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                        for b in p.state_batches)
        return ShareGroupState(error, p.state_epoch, p.start_offset, batches)

    return ApiKey.READ_SHARE_GROUP_STATE, body, parse


def _summary(group_id, topic_id, partition, leader_epoch):
    body = sreq.ReadShareGroupStateSummaryRequest(group_id=group_id, topics=[sreq.ReadStateSummaryData(
        topic_id=topic_id, partitions=[sreq.PartitionData(partition=partition, leader_epoch=leader_epoch)])])

    def parse(response) -> ShareStateSummary:
        p = _first(response)
        error = _error(p)
        if p is None or error != 0:
            return ShareStateSummary(error, 0, -1)
        # a v0 answer decodes DeliveryCompleteCount as its default, -1 (unknown)
        return ShareStateSummary(error, p.state_epoch, p.start_offset, p.leader_epoch, p.delivery_complete_count)

    return ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, body, parse


REQUESTS = {
    "initialize_state": _initialize,
    "write_state": _write,
    "delete_state": _delete,
    "read_state": _read,
    "read_summary": _summary,
}


# --- responses (the handlers') ------------------------------------------------------------------
def initialize_response(topic_id, partition, error):
    return ires.InitializeShareGroupStateResponse(results=[ires.InitializeStateResult(
        topic_id=topic_id, partitions=[ires.PartitionResult(partition=partition, error_code=int(error))])])


def write_response(topic_id, partition, error):
    return wres.WriteShareGroupStateResponse(results=[wres.WriteStateResult(
        topic_id=topic_id, partitions=[wres.PartitionResult(partition=partition, error_code=int(error))])])


def delete_response(topic_id, partition, error):
    return dres.DeleteShareGroupStateResponse(results=[dres.DeleteStateResult(
        topic_id=topic_id, partitions=[dres.PartitionResult(partition=partition, error_code=int(error))])])


def read_response(topic_id, partition, state: ShareGroupState):
    batches = [rres.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                               delivery_state=b.delivery_state, delivery_count=b.delivery_count)
               for b in state.batches]
    return rres.ReadShareGroupStateResponse(results=[rres.ReadStateResult(topic_id=topic_id, partitions=[
        rres.PartitionResult(partition=partition, error_code=int(state.error), state_epoch=state.state_epoch,
                             start_offset=state.start_offset, state_batches=batches)])])


def summary_response(topic_id, partition, error, state_epoch, start_offset, leader_epoch=-1,
                     delivery_complete_count=-1):
    return sres.ReadShareGroupStateSummaryResponse(results=[sres.ReadStateSummaryResult(topic_id=topic_id, partitions=[sres.PartitionResult(
        partition=partition, error_code=int(error), state_epoch=state_epoch, leader_epoch=leader_epoch,
        start_offset=start_offset, delivery_complete_count=delivery_complete_count)])])
