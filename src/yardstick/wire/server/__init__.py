"""The policy server: any policy class served over the wires (websocket, unix socket, TLS, gRPC) and the
openpi and roboarena dialects."""
