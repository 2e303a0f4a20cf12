"""Talking to a running broker over the Kafka protocol: ``ProtocolClient`` sends requests on one
connection; ``RemoteBroker`` answers the embedded ``Broker``'s questions through it."""
