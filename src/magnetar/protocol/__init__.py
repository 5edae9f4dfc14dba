"""magnetar.protocol: Pulsar's binary protocol as a sans-IO codec (no sockets, no clock, no tasks).

Module map (read each module's docstring for its theory of operation):

- ``errors``: ProtocolError / RemoteProtocolError / LocalProtocolError and friends.
- ``enums``: IntEnums mirroring PulsarApi.proto (upper layers never import magnetar.proto).
- ``frames``: FrameDecoder (size limit checked on the prefix, before buffering) and encoders.
- ``payload``: headers-and-payload (0x0e01 + CRC32-C, 0x0e02 broker-entry metadata), metadata helpers.
- ``batch``, ``compression``, ``chunks``: batch containers, the five codecs, chunked messages.
- ``message_id``: MessageId, serialized exactly like the official client.
- ``commands`` (``server_commands``, ``client_commands``, ``wire``): one builder per command.
- ``connection`` (``_state``, ``client_connection``, ``events``): the two state machines, h11-style.
"""
