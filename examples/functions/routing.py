"""Content-based routing with context.publish (pulsar-client's Function API).

Fruits go to the topic in user config "fruit-topic", vegetables to "vegetable-topic",
anything else is logged and dropped.
"""

from pulsar import Function


class RoutingFunction(Function):
    def __init__(self):
        self.fruits = {"apple", "orange", "pear", "banana"}
        self.vegetables = {"carrot", "lettuce", "radish", "leek"}

    def process(self, item, context):
        if item in self.fruits:
            context.publish(context.get_user_config_value("fruit-topic"), item)
        elif item in self.vegetables:
            context.publish(context.get_user_config_value("vegetable-topic"), item)
        else:
            context.get_logger().warning("the item %s is neither a fruit nor a vegetable", item)
        return None
