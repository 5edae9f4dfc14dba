"""The identity function, as a plain Python function (no pulsar-client needed)."""


def identity(input):
    return input
