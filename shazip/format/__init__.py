"""The `.shz` byte layout (docs/format.md) and the rules every reader applies to it: the
container (headers, blocks, trailers; formats 1-4), the chain that ties an output's frames, the
seek table after them, and the listing of what a stream holds without decoding it."""
