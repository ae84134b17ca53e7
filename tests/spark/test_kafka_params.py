"""The source's and sink's ``kafka.security.protocol`` / ``kafka.ssl.*`` options reach their
clients: a TLS broker read through the source's pooled cluster client and written through the
sink's pooled producer (the pool is what executors use; no Spark session needed)."""

from __future__ import annotations

import pytest

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.metadata_request import MetadataRequest
from odradek.spark import client_pool
from odradek.spark.kafka_params import sink_params, source_params
from odradek.testing import broker as testing_broker
from odradek.testing.broker import InProcessBroker
from tests.server.tls_certs import make_pki


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    props = testing_broker.test_config(tmp_path_factory.mktemp("tls") / "data")
    props.update({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": pki["server"]})
    with InProcessBroker(None, props) as b:
        yield b, pki
    client_pool.reset()


def options(pki) -> dict[str, str]:
    return {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": pki["ca"]}


def test_source_and_sink_speak_tls(tls):
    broker, pki = tls
    config = dict(sink_params(options(pki)))
    producer = client_pool.producer(broker.bootstrap, **config)
    thread = client_pool.loop_thread()

    async def write():
        future = producer.send("spark-ssl", b"over tls")
        await producer.flush()
        return await future

    assert thread.run(write(), 30).offset == 0
    cluster = client_pool.cluster(broker.bootstrap, source_params(options(pki))["cluster"])
    assert cluster.ssl_context is not None
    response = thread.run(cluster.send(None, ApiKey.METADATA, lambda v: MetadataRequest(topics=None)), 30)
    assert "spark-ssl" in {t.name for t in response.topics}


def test_bad_security_options_fail_planning(tls):
    _, pki = tls
    with pytest.raises(ValueError, match="PEM"):
        source_params({**options(pki), "kafka.ssl.truststore.type": "JKS"})
    with pytest.raises(ValueError, match="kafka.ssl.keystore.pasword"):
        sink_params({**options(pki), "kafka.ssl.keystore.pasword": "x"})
    assert "security" not in dict(source_params({"kafka.security.protocol": "PLAINTEXT"})["cluster"])
