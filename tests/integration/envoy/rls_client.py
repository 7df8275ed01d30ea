#!/usr/bin/python3
"""A gRPC client of Envoy's rate limit service that Sluice did not write: Debian's
python3-grpcio, with the messages protoc --python_out made from proto/ at build time
(python3-protobuf runs them). The integration tests (tests/integration/envoy_rls_test.cpp)
run it against sluiced and read one JSON document from its stdout.

  rls_client.py --pb-dir DIR --target 127.0.0.1:8081 call REQUEST_JSON...
      each request (the proto's JSON mapping) in turn on one channel; prints a list of
      {"code": "OK"|grpc status name, "details": str, "response": {...}, "ms": float}
  rls_client.py ... concurrent --clients 50 --calls 20 REQUEST_JSON
      every client on its own channel, started together, makes --calls calls; prints
      {"OK": n, "OVER_LIMIT": n, "errors": {status: n}, "max_ms": float}
  rls_client.py ... garbage --count N --seed S
      N ShouldRateLimit calls whose bodies are random bytes or mutated valid requests;
      prints {"codes": {status: n}}
  rls_client.py ... health [SERVICE]
      grpc.health.v1.Health/Check; prints {"code": ..., "status": "SERVING"|...}

  --ca FILE connects over TLS trusting FILE (else plaintext); --cert FILE --key FILE also
  present a client certificate (mutual TLS).
"""
import argparse
import json
import random
import sys
import threading
import time

import grpc

METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH = "/grpc.health.v1.Health/Check"
HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def load_messages(pb_dir):
    sys.path.insert(0, pb_dir)
    from envoy.service.ratelimit.v3 import rls_pb2  # noqa: E402  (generated at build time)
    from google.protobuf import json_format  # noqa: E402
    return rls_pb2, json_format


def read(path):
    with open(path, "rb") as f:
        return f.read()


def open_channel(args):
    if not args.ca:
        return grpc.insecure_channel(args.target)
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(args.ca),
        private_key=read(args.key) if args.key else None,
        certificate_chain=read(args.cert) if args.cert else None)
    return grpc.secure_channel(args.target, creds)


def stub(channel, rls_pb2):
    return channel.unary_unary(
        METHOD,
        request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
        response_deserializer=rls_pb2.RateLimitResponse.FromString)


def one_call(call, request, timeout, json_format):
    start = time.monotonic()
    try:
        response = call(request, timeout=timeout)
        out = {"code": "OK", "details": "",
               "response": json_format.MessageToDict(response, preserving_proto_field_name=True)}
    except grpc.RpcError as e:
        out = {"code": e.code().name, "details": e.details() or ""}
    out["ms"] = (time.monotonic() - start) * 1000.0
    return out


def encode_health_request(service):
    # grpc.health.v1.HealthCheckRequest {string service = 1;}: written by hand, the
    # package's own stubs (grpcio-health-checking) being no Debian package.
    data = service.encode()
    if not data:
        return b""
    if len(data) > 127:
        raise SystemExit("service name too long for this client")
    return b"\x0a" + bytes([len(data)]) + data


def decode_health_status(data):
    # HealthCheckResponse {ServingStatus status = 1;}: a missing field is 0 (UNKNOWN).
    if len(data) >= 2 and data[0] == 0x08:
        return HEALTH_STATUS.get(data[1], str(data[1]))
    return "UNKNOWN"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pb-dir", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--timeout-ms", type=float, default=5000)
    ap.add_argument("--ca")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("call")
    c.add_argument("requests", nargs="+")
    k = sub.add_parser("concurrent")
    k.add_argument("--clients", type=int, default=50)
    k.add_argument("--calls", type=int, default=10)
    k.add_argument("request")
    g = sub.add_parser("garbage")
    g.add_argument("--count", type=int, default=500)
    g.add_argument("--seed", type=int, default=1)
    h = sub.add_parser("health")
    h.add_argument("service", nargs="?", default="")
    args = ap.parse_args()
    timeout = args.timeout_ms / 1000.0
    rls_pb2, json_format = load_messages(args.pb_dir)

    def parse(text):
        return json_format.Parse(text, rls_pb2.RateLimitRequest())

    if args.mode == "call":
        with open_channel(args) as ch:
            call = stub(ch, rls_pb2)
            out = [one_call(call, parse(r), timeout, json_format) for r in args.requests]
    elif args.mode == "concurrent":
        request = parse(args.request)
        counts = {"OK": 0, "OVER_LIMIT": 0, "errors": {}, "max_ms": 0.0}
        lock = threading.Lock()
        ready = threading.Barrier(args.clients)

        def client():
            with open_channel(args) as ch:
                call = stub(ch, rls_pb2)
                grpc.channel_ready_future(ch).result(timeout=10)
                ready.wait()
                for _ in range(args.calls):
                    r = one_call(call, request, timeout, json_format)
                    with lock:
                        counts["max_ms"] = max(counts["max_ms"], r["ms"])
                        if r["code"] != "OK":
                            counts["errors"][r["code"]] = counts["errors"].get(r["code"], 0) + 1
                        else:
                            code = r["response"].get("overall_code", "UNKNOWN")
                            counts[code] = counts.get(code, 0) + 1

        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out = counts
    elif args.mode == "garbage":
        rng = random.Random(args.seed)
        valid = rls_pb2.RateLimitRequest(domain="edge", hits_addend=2)
        d = valid.descriptors.add()
        e = d.entries.add()
        e.key, e.value = "remote_address", "10.0.0.1"
        d.hits_addend.value = 1
        d.limit.requests_per_unit = 3
        seed_bytes = valid.SerializeToString()
        codes = {}
        with open_channel(args) as ch:
            call = ch.unary_unary(METHOD, request_serializer=lambda b: b,
                                  response_deserializer=lambda b: b)
            for i in range(args.count):
                if i % 2:
                    body = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
                else:
                    body = bytearray(seed_bytes)
                    for _ in range(rng.randrange(1, 6)):
                        op = rng.randrange(3)
                        pos = rng.randrange(len(body) + 1)
                        if op == 0 and body:
                            body[min(pos, len(body) - 1)] = rng.randrange(256)
                        elif op == 1:
                            body[pos:pos] = bytes([rng.randrange(256)])
                        elif body:
                            del body[min(pos, len(body) - 1)]
                    body = bytes(body)
                try:
                    call(body, timeout=timeout)
                    name = "OK"
                except grpc.RpcError as err:
                    name = err.code().name
                codes[name] = codes.get(name, 0) + 1
        out = {"codes": codes}
    else:
        with open_channel(args) as ch:
            call = ch.unary_unary(HEALTH, request_serializer=lambda b: b,
                                  response_deserializer=lambda b: b)
            try:
                data = call(encode_health_request(args.service), timeout=timeout)
                out = {"code": "OK", "status": decode_health_status(data)}
            except grpc.RpcError as e:
                out = {"code": e.code().name, "status": ""}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
