"""Child process: a 5.x consumer written with grpcio and the proxy's own protobuf classes that
answers the Telemetry commands the official Python client ignores, as the Java client does
(ClientImpl.onPrintThreadStackTraceCommand, PushConsumerImpl.onVerifyMessageCommand).

Usage: telemetry_client.py ENDPOINT GROUP TOPIC. It opens Telemetry with a push consumer's
settings and prints one JSON object per line: {"settings": true} once the proxy answered
them, {"stack": NONCE} for each thread stack sent, {"verify": BODY} for each message asked to
verify. A message's body decides the answer: "fail" FAILED_TO_CONSUME_MESSAGE, "corrupt"
MESSAGE_CORRUPTED, "fifo" VERIFY_FIFO_MESSAGE_UNSUPPORTED, "silent" none at all, anything else
OK. A line on stdin ends the stream; the last line printed is {"done": true}.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import traceback
from collections.abc import Iterator

import grpc

from rmq.proxy.v2 import definition_pb2 as d
from rmq.proxy.v2 import service_pb2 as s

CLIENT_ID = "telemetry-client@test"
METADATA = (("x-mq-client-id", CLIENT_ID), ("x-mq-language", "JAVA"), ("x-mq-client-version", "5.0.8"))
VERIFY = {
    "fail": d.FAILED_TO_CONSUME_MESSAGE,
    "corrupt": d.MESSAGE_CORRUPTED,
    "fifo": d.VERIFY_FIFO_MESSAGE_UNSUPPORTED,
}


def out(**values: object) -> None:
    print(json.dumps(values), flush=True)


def stacks() -> str:
    """Every thread's stack, as Java's Utilities.stackTrace prints them."""
    frames = sys._current_frames()
    return "\n".join(
        f'"{t.name}"\n' + "".join(traceback.format_stack(frames[t.ident]))
        for t in threading.enumerate()
        if t.ident in frames
    )


def main() -> None:
    endpoint, group, topic = sys.argv[1:4]
    outbox: queue.Queue[s.TelemetryCommand | None] = queue.Queue()
    settings = d.Settings(
        client_type=d.PUSH_CONSUMER,
        subscription=d.Subscription(
            group=d.Resource(name=group),
            subscriptions=[
                d.SubscriptionEntry(topic=d.Resource(name=topic), expression=d.FilterExpression(type=d.TAG))
            ],
        ),
    )
    outbox.put(s.TelemetryCommand(settings=settings))

    def requests() -> Iterator[s.TelemetryCommand]:
        while (command := outbox.get()) is not None:
            yield command

    def stop_on_stdin() -> None:
        sys.stdin.readline()
        outbox.put(None)

    threading.Thread(target=stop_on_stdin, daemon=True).start()
    with grpc.insecure_channel(endpoint) as channel:
        telemetry = channel.stream_stream(
            "/apache.rocketmq.v2.MessagingService/Telemetry",
            request_serializer=s.TelemetryCommand.SerializeToString,
            response_deserializer=s.TelemetryCommand.FromString,
        )
        for command in telemetry(requests(), metadata=METADATA):
            kind = command.WhichOneof("command")
            if kind == "settings":
                out(settings=True)
            elif kind == "print_thread_stack_trace_command":
                nonce = command.print_thread_stack_trace_command.nonce
                trace = s.ThreadStackTrace(nonce=nonce, thread_stack_trace=stacks())
                outbox.put(s.TelemetryCommand(status=d.Status(code=d.OK), thread_stack_trace=trace))
                out(stack=nonce)
            elif kind == "verify_message_command":
                verify = command.verify_message_command
                body = verify.message.body.decode()
                out(verify=body)
                if body != "silent":
                    result = s.VerifyMessageResult(nonce=verify.nonce)
                    status = d.Status(code=VERIFY.get(body, d.OK))
                    outbox.put(s.TelemetryCommand(status=status, verify_message_result=result))
    out(done=True)


if __name__ == "__main__":
    main()
