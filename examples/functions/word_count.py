"""Word count with durable counters: one counter per word (pulsar-client's Function API)."""

from pulsar import Function


class WordCountFunction(Function):
    def process(self, input, context):
        for word in input.split():
            context.incr_counter(word, 1)
        return None
