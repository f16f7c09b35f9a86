#!/usr/bin/env python3
"""Write one long conversation as gptme writes it, for the benchmarks of one conversation.

    python tools/bench/make_long_conversation.py DIR MESSAGES

DIR/conversation.jsonl gets MESSAGES messages of about 1 KiB (user and assistant in turn,
assistant ones with gptme's metadata: model, usage, cost), each line as gptme's json.dumps
writes it; DIR/events.jsonl gets one append event with seq 1, so that the next events
(seq 2, 3, ...) are no checkpoint (gptme checkpoints every 50th). Deterministic.
"""
import sys

d, n = sys.argv[1], int(sys.argv[2])
filler = ("lorem ipsum dolor sit amet " * 40)[:900]
first = None
with open(f"{d}/conversation.jsonl", "w") as f:
    for i in range(n):
        t = "2026-07-01T%02d:%02d:%02d.%06d" % ((i // 3600) % 24, (i // 60) % 60, i % 60, 1 + i % 999998)
        if i % 2 == 0:
            line = '{"role": "user", "content": "message %d: %s", "timestamp": "%s"}' % (i, filler, t)
        else:
            line = ('{"role": "assistant", "content": "reply %d: %s", "timestamp": "%s", "metadata": '
                    '{"model": "anthropic/claude", "usage": {"input_tokens": 10, "output_tokens": 5}, "cost": 0.001}}') % (i, filler, t)
        if first is None:
            first = line
        f.write(line + "\n")
if first is not None:
    with open(f"{d}/events.jsonl", "w") as f:
        f.write('{"seq": 1, "ts": "2026-07-01T00:00:00.000001+00:00", "type": "message_append", "payload": {"message": %s}}\n' % first)
