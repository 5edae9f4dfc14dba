"""An exclamation function written against pulsar-client's Function API (runs on Pulsar unchanged)."""

from pulsar import Function


class ExclamationFunction(Function):
    def __init__(self):
        pass

    def process(self, input, context):
        return input + "!"
