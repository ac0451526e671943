"""Test entry point (no TensorFlow): what a script finds of S3, of the network and of SageMaker's config files.

``--mode s3``: reads its channel's objects itself with boto3 from ``--data-uri`` (the channel's S3Uri, a
hyperparameter), writes one object of its own under ``--write-uri``, and algo-2 overwrites the staged input object
``--overwrite-uri``. ``--mode isolated``: records what an isolated container has: credentials, an S3 endpoint,
whether its default route's gateway (the job network's bridge) answers, the peer's name (resolved by the job
network's own DNS). Never sends a packet to an address outside the job's network.
Either way every host writes ``SM_OUTPUT_DATA_DIR/probe-<host>.json`` with what it saw, including the Debugger
and profiler config files.
"""

import argparse
import json
import os
import socket

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["s3", "isolated"], required=True)
parser.add_argument("--data-uri", default="")
parser.add_argument("--write-uri", default="")
parser.add_argument("--overwrite-uri", default="")
args, _unknown = parser.parse_known_args()

host = os.environ["SM_CURRENT_HOST"]
configs = {}
for name in ("debughookconfig.json", "profilerconfig.json"):
    path = os.path.join("/opt/ml/input/config", name)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            configs[name] = json.load(handle)
record = {"host": host, "configs": configs}


def _resolves(name: str) -> bool:
    try:
        socket.getaddrinfo(name, None)
    except OSError:
        return False
    return True


if args.mode == "s3":
    import boto3

    s3 = boto3.client("s3")
    bucket, _, prefix = args.data_uri[len("s3://"):].partition("/")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    record["read"] = {
        item["Key"]: s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode() for item in listed
    }
    out_bucket, _, out_prefix = args.write_uri[len("s3://"):].partition("/")
    s3.put_object(Bucket=out_bucket, Key=f"{out_prefix}/{host}.txt", Body=f"written by {host}".encode())
    if host == "algo-2":
        over_bucket, _, over_key = args.overwrite_uri[len("s3://"):].partition("/")
        s3.put_object(Bucket=over_bucket, Key=over_key, Body=b"overwritten by algo-2")
else:
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # no probe of the instance metadata address
    import boto3

    # The default route's gateway is the job network's own bridge: the one way out, through this machine.
    with open("/proc/net/route", encoding="ascii") as routes:
        gateways = [line.split()[2] for line in routes.readlines()[1:] if line.split()[1] == "00000000"]
    way_out = "no default route"
    if gateways:
        gateway = socket.inet_ntoa(bytes.fromhex(gateways[0])[::-1])
        try:
            socket.create_connection((gateway, 22), timeout=5).close()
            way_out = "connected"
        except ConnectionRefusedError:
            way_out = "refused"  # something answered: the machine behind the gateway
        except OSError as exc:
            way_out = f"unreachable ({exc.strerror or exc})"
    record.update(
        credentials=boto3.Session().get_credentials() is not None,
        endpoint=os.environ.get("AWS_ENDPOINT_URL"),
        way_out=way_out,
        peer_resolves=_resolves("algo-2" if host == "algo-1" else "algo-1"),
        source=sorted(os.listdir("/opt/ml/input/data/code")),
    )
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"probe-{host}.json"), "w", encoding="utf-8") as handle:
    json.dump(record, handle)
print("s3_probe", record, flush=True)
