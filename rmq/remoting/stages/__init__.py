"""The pipeline stages, outermost first: tls (negotiate / wrap_client, PrefixedStream),
websocket (WebSocketStream), idle (IdleStream), codec (CommandStream)."""
