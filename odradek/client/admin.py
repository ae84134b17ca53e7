"""The asyncio admin client: topics, partitions, configs, the cluster, records, groups,
transactions, leader elections and partition reassignments (``admin_groups``,
``admin_transactions``, ``admin_elections``, ``admin_reassignments``, ``admin_log_dirs``).

    async with AsyncAdminClient("127.0.0.1:9092") as admin:
        await admin.create_topics([NewTopic("events", num_partitions=3, replication_factor=1)])
        print(await admin.describe_topics(["events"]))

Routing: topic creation, deletion and partition growth go to the controller; configs of a
broker to that broker, other configs to any broker; DeleteRecords to each partition's leader;
group calls to each group's coordinator (``GroupCoordinatorClient``), ListGroups to every
broker; transaction calls as ``admin_transactions`` says.

Errors: calls that act on several items (topics, resources, partitions, groups) raise the
first item's ``BrokerError`` once every item is settled, with all failures in its ``errors``
dict; the items not in it succeeded. Errors that mean "ask again" (controller moved, leader
unknown, coordinator loading, connection lost) are retried with backoff until ``timeout_ms``;
an error about the item itself (unknown topic, topic exists) is the answer.
"""

from __future__ import annotations

import asyncio
from typing import Self

from odradek.client.admin_acls import AclAdmin
from odradek.client.admin_elections import ElectionAdmin
from odradek.client.admin_consumer_groups import ConsumerGroupAdmin
from odradek.client.admin_share_groups import ShareGroupAdmin
from odradek.client.admin_groups import GroupAdmin
from odradek.client.admin_log_dirs import LogDirAdmin
from odradek.client.admin_reassignments import ReassignmentAdmin
from odradek.client.admin_transactions import TransactionAdmin
from odradek.client.admin_types import (
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
    TopicDescription,
)
from odradek.client.admin_quotas import QuotaAdmin
from odradek.client.admin_scram import ScramAdmin
from odradek.client.client_security import connection_settings
from odradek.client.cluster import ClusterClient
from odradek.client.errors import BrokerError, KafkaError, raise_first
from odradek.client.metadata import BrokerInfo
from odradek.client.offset_fetcher import OffsetFetcher
from odradek.client.topic_partition import OffsetAndTimestamp, TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated import alter_configs_request as alter_req
from odradek.protocol.generated import create_partitions_request as cp_req
from odradek.protocol.generated import create_topics_request as ct_req
from odradek.protocol.generated import delete_records_request as dr_req
from odradek.protocol.generated import incremental_alter_configs_request as inc_req
from odradek.protocol.generated.delete_topics_request import (
    DeleteTopicsRequest,
    DeleteTopicState,
)
from odradek.protocol.generated.describe_cluster_request import DescribeClusterRequest
from odradek.protocol.generated.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["AsyncAdminClient"]

_TOPIC_STATES_FROM = 6  # DeleteTopics v6+ lists topics as (name, id)
_ASK_AGAIN = frozenset({
    ErrorCode.NOT_CONTROLLER, ErrorCode.THROTTLING_QUOTA_EXCEEDED, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
})


class AsyncAdminClient(GroupAdmin, ConsumerGroupAdmin, ShareGroupAdmin, TransactionAdmin, ElectionAdmin, ReassignmentAdmin,
                       LogDirAdmin, ScramAdmin, AclAdmin, QuotaAdmin):
    def __init__(self, bootstrap_servers, *, client_id: str = "odradek-admin",
                 request_timeout_ms: int = 30_000, default_api_timeout_ms: int = 60_000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1_000,
                 connect_timeout_ms: int = 10_000, metadata_max_age_ms: int = 300_000,
                 security=None) -> None:
        """``security``: Kafka-named ``security.protocol``, ``ssl.*``, ``sasl.*`` properties
        (client/client_security.py)."""
        self._cluster = ClusterClient(bootstrap_servers, client_id=client_id,
                                      request_timeout_ms=request_timeout_ms, retry_backoff_ms=retry_backoff_ms,
                                      retry_backoff_max_ms=retry_backoff_max_ms, connect_timeout_ms=connect_timeout_ms,
                                      metadata_max_age_ms=metadata_max_age_ms,
                                      **connection_settings(security))
        self._timeout = default_api_timeout_ms / 1000
        self._offsets = OffsetFetcher(self._cluster)

    @property
    def cluster(self) -> ClusterClient:
        return self._cluster

    async def start(self) -> Self:
        await self._cluster.start()
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self._cluster.close()

    def _deadline(self, timeout_ms: float | None) -> float:
        return self._cluster.loop.time() + (self._timeout if timeout_ms is None else timeout_ms / 1000)

    async def _settle(self, items, ask, deadline: float) -> dict:
        """Run ``ask(pending_items) -> {item: (error_code, message, value)}`` until every item
        succeeded or failed for good; retriable failures are asked again after a backoff.
        Returns ``{item: value}`` of the successes, raising the failures (``raise_first``)."""
        cluster = self._cluster
        pending = list(items)
        done: dict = {}
        errors: dict = {}
        attempt = 0
        while pending:
            try:
                answers = await ask(pending)
            except KafkaError as e:
                if not e.retriable:
                    raise
                answers = {item: (e, None, None) for item in pending}
            retry = []
            for item in pending:
                code, message, value = answers.get(item, (KafkaError(f"no answer for {item}"), None, None))
                error = code if isinstance(code, KafkaError) else (BrokerError(code, message, item) if code else None)
                if error is None:
                    done[item] = value
                elif _ask_again(error) and cluster.loop.time() + cluster.backoff(attempt) < deadline:
                    retry.append(item)
                else:
                    errors[item] = error
            pending = retry
            if pending:
                await asyncio.sleep(cluster.backoff(attempt))
                attempt += 1
                await cluster.refresh([])  # the controller or leaders may have moved
        raise_first(errors)
        return done

    # --- topics --------------------------------------------------------------------------
    async def create_topics(self, new_topics, *, timeout_ms: int | None = None, validate_only: bool = False) -> None:
        """Create ``new_topics`` (``NewTopic``s, or names for broker defaults)."""
        topics = {t.name: t for t in (NewTopic(t) if isinstance(t, str) else t for t in new_topics)}
        deadline = self._deadline(timeout_ms)

        async def ask(names):
            request = ct_req.CreateTopicsRequest(
                topics=[_creatable(topics[n]) for n in names],
                timeout_ms=int(max(deadline - self._cluster.loop.time(), 0) * 1000),
                validate_only=validate_only)
            response = await self._cluster.send_to_controller(ApiKey.CREATE_TOPICS, request)
            return {t.name: (t.error_code, t.error_message, None) for t in response.topics}

        await self._settle(topics, ask, deadline)

    async def delete_topics(self, names, *, timeout_ms: int | None = None) -> None:
        deadline = self._deadline(timeout_ms)

        async def ask(pending):
            def build(version: int) -> DeleteTopicsRequest:
                timeout = int(max(deadline - self._cluster.loop.time(), 0) * 1000)
                if version >= _TOPIC_STATES_FROM:
                    return DeleteTopicsRequest(topics=[DeleteTopicState(name=n) for n in pending], timeout_ms=timeout)
                return DeleteTopicsRequest(topic_names=list(pending), timeout_ms=timeout)

            response = await self._cluster.send_to_controller(ApiKey.DELETE_TOPICS, build)
            return {r.name: (r.error_code, r.error_message, None) for r in response.responses}

        await self._settle(list(dict.fromkeys(names)), ask, deadline)

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        """The names of all topics, sorted."""
        meta = await self._retry(lambda: self._cluster.refresh(None))
        return sorted(n for n, t in meta.topics.items() if include_internal or not t.is_internal)

    async def describe_topics(self, names=None) -> dict[str, TopicDescription]:
        """Partitions (leader, replicas, ISR) of ``names`` (all topics when None)."""
        asked = None if names is None else list(dict.fromkeys(names))
        meta = await self._retry(lambda: self._cluster.refresh(asked))
        wanted = sorted(meta.topics) if asked is None else asked
        out, errors = {}, {}
        for name in wanted:
            info = meta.topics.get(name)
            if info is None:
                errors[name] = BrokerError(meta.errors.get(name, 3), subject=name)
            else:
                out[name] = TopicDescription(info.name, info.topic_id, info.is_internal, info.partitions)
        raise_first(errors)
        return out

    async def create_partitions(self, new_partitions: dict, *, timeout_ms: int | None = None,
                                validate_only: bool = False) -> None:
        """Grow topics: ``{topic: NewPartitions | total_count}``."""
        wanted = {t: (p if isinstance(p, NewPartitions) else NewPartitions(int(p))) for t, p in new_partitions.items()}
        deadline = self._deadline(timeout_ms)

        async def ask(names):
            topics = [cp_req.CreatePartitionsTopic(
                name=n, count=wanted[n].total_count,
                assignments=None if wanted[n].assignments is None else
                [cp_req.CreatePartitionsAssignment(list(a)) for a in wanted[n].assignments]) for n in names]
            request = cp_req.CreatePartitionsRequest(
                topics=topics, timeout_ms=int(max(deadline - self._cluster.loop.time(), 0) * 1000),
                validate_only=validate_only)
            response = await self._cluster.send_to_controller(ApiKey.CREATE_PARTITIONS, request)
            return {r.name: (r.error_code, r.error_message, None) for r in response.results}

        await self._settle(wanted, ask, deadline)

    # --- configs -------------------------------------------------------------------------
    def _config_node(self, resource: ConfigResource) -> int | None:
        """Broker configs are answered by that broker; the rest by any."""
        if resource.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and resource.name.isdigit():
            return int(resource.name)
        return None

    async def _by_node(self, resources, send_one, deadline: float) -> dict:
        """``send_one(node, resources) -> answers`` per destination broker, merged."""
        async def ask(pending):
            groups: dict = {}
            for r in pending:
                groups.setdefault(self._config_node(r), []).append(r)
            answers: dict = {}
            for part in await asyncio.gather(*(send_one(n, rs) for n, rs in groups.items())):
                answers.update(part)
            return answers

        return await self._settle(resources, ask, deadline)

    async def describe_configs(self, resources, *, include_synonyms: bool = False,
                               timeout_ms: int | None = None) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Every config entry of each resource, by name."""
        resources = [ConfigResource(*r) if not isinstance(r, ConfigResource) else r for r in resources]

        async def send_one(node, rs):
            request = DescribeConfigsRequest(
                resources=[DescribeConfigsResource(r.type, r.name, None) for r in rs],
                include_synonyms=include_synonyms)
            response = await self._cluster.send(node, ApiKey.DESCRIBE_CONFIGS, request)
            return {ConfigResource(x.resource_type, x.resource_name):
                    (x.error_code, x.error_message, {c.name: _config_entry(c) for c in x.configs})
                    for x in response.results}

        return await self._by_node(resources, send_one, self._deadline(timeout_ms))

    async def alter_configs(self, configs: dict, *, validate_only: bool = False, timeout_ms: int | None = None) -> None:
        """Replace each resource's dynamic configs with ``{resource: {name: value}}`` (the
        legacy AlterConfigs: names left out return to their defaults)."""
        wanted = {(ConfigResource(*r) if not isinstance(r, ConfigResource) else r): c for r, c in configs.items()}

        async def send_one(node, rs):
            request = alter_req.AlterConfigsRequest(
                resources=[alter_req.AlterConfigsResource(r.type, r.name, [
                    alter_req.AlterableConfig(k, v) for k, v in wanted[r].items()]) for r in rs],
                validate_only=validate_only)
            response = await self._cluster.send(node, ApiKey.ALTER_CONFIGS, request)
            return {ConfigResource(x.resource_type, x.resource_name): (x.error_code, x.error_message, None)
                    for x in response.responses}

        await self._by_node(list(wanted), send_one, self._deadline(timeout_ms))

    async def incremental_alter_configs(self, changes: dict, *, validate_only: bool = False,
                                        timeout_ms: int | None = None) -> None:
        """Apply ``{resource: [AlterConfigOp, ...]}`` (set, delete, append, subtract)."""
        wanted = {(ConfigResource(*r) if not isinstance(r, ConfigResource) else r): ops for r, ops in changes.items()}

        async def send_one(node, rs):
            request = inc_req.IncrementalAlterConfigsRequest(
                resources=[inc_req.AlterConfigsResource(r.type, r.name, [
                    inc_req.AlterableConfig(op.name, int(op.op), op.value) for op in _ops(wanted[r])]) for r in rs],
                validate_only=validate_only)
            response = await self._cluster.send(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
            return {ConfigResource(x.resource_type, x.resource_name): (x.error_code, x.error_message, None)
                    for x in response.responses}

        await self._by_node(list(wanted), send_one, self._deadline(timeout_ms))

    # --- cluster, records and offsets ----------------------------------------------------
    async def describe_cluster(self) -> ClusterDescription:
        async def attempt():
            response = await self._cluster.send(None, ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest())
            if response.error_code:
                raise BrokerError(response.error_code, response.error_message)
            return response

        response = await self._retry(attempt)
        brokers = tuple(BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in response.brokers)
        return ClusterDescription(response.cluster_id, response.controller_id, brokers)

    async def delete_records(self, offsets: dict, *, timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """Delete records below ``{TopicPartition: offset}`` (-1: the high watermark); returns
        each partition's new log start offset (low watermark)."""
        wanted = {TopicPartition(*tp): o for tp, o in offsets.items()}
        deadline = self._deadline(timeout_ms)
        cluster = self._cluster
        await cluster.wait_for_topics({tp.topic for tp in wanted}, deadline)

        async def send_one(node, tps):
            topics: dict = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(dr_req.DeleteRecordsPartition(tp.partition, wanted[tp]))
            request = dr_req.DeleteRecordsRequest(
                topics=[dr_req.DeleteRecordsTopic(t, ps) for t, ps in topics.items()],
                timeout_ms=int(max(deadline - cluster.loop.time(), 0) * 1000))
            response = await cluster.send(node, ApiKey.DELETE_RECORDS, request)
            return {TopicPartition(t.name, p.partition_index): (p.error_code, None, p.low_watermark)
                    for t in response.topics for p in t.partitions}

        async def ask(pending):
            groups: dict = {}
            answers: dict = {}
            for tp in pending:
                leader = cluster.metadata.leader(tp.topic, tp.partition)
                if leader is None:
                    answers[tp] = (ErrorCode.LEADER_NOT_AVAILABLE, None, None)
                else:
                    groups.setdefault(leader, []).append(tp)
            for part in await asyncio.gather(*(send_one(n, tps) for n, tps in groups.items())):
                answers.update(part)
            return answers

        return await self._settle(list(wanted), ask, deadline)

    async def list_offsets(self, specs: dict, *, timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """``{TopicPartition: spec}`` where spec is a timestamp (ms) or -2 earliest, -1
        latest, -3 the largest timestamp; see ``offset_fetcher``."""
        timeout = self._timeout if timeout_ms is None else timeout_ms / 1000
        return await self._offsets.list_offsets(specs, timeout)

    async def _retry(self, operation):
        return await self._cluster.retry(operation, self._deadline(None))


def _ask_again(error: KafkaError) -> bool:
    """Whether an item's error means "ask again (elsewhere)" rather than an answer: a broker
    error about the item itself (the topic exists, is unknown, ...) is final, as in Java's
    admin client, even where Kafka's table calls it retriable."""
    if isinstance(error, BrokerError):
        return error.code in _ASK_AGAIN
    return error.retriable


def _creatable(topic: NewTopic) -> ct_req.CreatableTopic:
    configs = [ct_req.CreatableTopicConfig(k, v) for k, v in topic.configs.items()]
    if topic.replica_assignment:
        assignments = [ct_req.CreatableReplicaAssignment(p, list(b))
                       for p, b in sorted(topic.replica_assignment.items())]
        return ct_req.CreatableTopic(topic.name, -1, -1, assignments, configs)
    return ct_req.CreatableTopic(topic.name, topic.num_partitions, topic.replication_factor, [], configs)


def _config_entry(c) -> ConfigEntry:
    source = c.config_source if c.config_source >= 0 else (
        ConfigSource.DEFAULT_CONFIG if c.is_default else ConfigSource.UNKNOWN)
    try:
        source = ConfigSource(source)
    except ValueError:
        source = ConfigSource.UNKNOWN
    synonyms = tuple((s.name, s.value, s.source) for s in c.synonyms)
    return ConfigEntry(c.name, c.value, source, source == ConfigSource.DEFAULT_CONFIG or c.is_default,
                       c.read_only, c.is_sensitive, synonyms)


def _ops(ops):
    for op in ops:
        if isinstance(op, AlterConfigOp):
            yield op
        else:
            yield AlterConfigOp(*op)

