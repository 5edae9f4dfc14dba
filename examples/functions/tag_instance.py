"""Tags each input with a counter: used by the effectively-once test (a class without pulsar.Function)."""


class Tag:
    def process(self, input, context):
        return f"{input}"
