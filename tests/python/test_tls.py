# The Python client on a mutual-TLS cluster: LocalCluster(tls=...) with certificates made by
# deploy/make-certs.sh; Client(cluster) uses the same pair; a client without TLS is told the
# scheduler speaks TLS; partial TLS settings are refused before anything connects.
import os
import subprocess

import pytest

psched = pytest.importorskip("psched")
pa = pytest.importorskip("psched.array")

SOURCE_DIR = os.environ.get("PSCHED_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls") / "certs"
    subprocess.run([os.path.join(SOURCE_DIR, "deploy", "make-certs.sh"), str(d), "local"], check=True,
                   capture_output=True, timeout=60)
    return (d / "ca.pem", d / "local.pem", d / "local.key")


@pytest.fixture(scope="module")
def tls_cluster(certs):
    with psched.LocalCluster(cpus=1, threads_per_worker=1, tls=certs, dashboard=False) as c:
        yield c


def test_a_tls_cluster_computes_exactly_through_the_client(tls_cluster):
    with psched.Client(tls_cluster) as c:
        assert c.address.startswith("tls://")
        assert pa.ones((40, 40), chunks=10).sum().compute(client=c) == 1600


def test_a_client_without_tls_is_told_the_scheduler_speaks_tls(tls_cluster):
    address = psched.Client(tls_cluster).address
    plain = "tcp://" + address[len("tls://"):]
    with pytest.raises(psched.Error, match="the scheduler speaks TLS"):
        psched.Client(plain)


def test_a_certificate_without_its_key_is_refused_naming_it(tls_cluster, certs):
    with pytest.raises(psched.Error, match="--tls-cert given without --tls-key"):
        psched.Client(scheduler_file=tls_cluster.scheduler_file, tls=(certs[0], certs[1], ""))
