"""The numbers AlterConfigs, IncrementalAlterConfigs and DescribeConfigs carry: Kafka's
``ConfigResource.Type`` and ``AlterConfigOp.OpType`` on the wire."""

# AlterConfigOp.OpType.
SET = 0
DELETE = 1
APPEND = 2
SUBTRACT = 3
OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
# ConfigResource.Type.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
