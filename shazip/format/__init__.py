"""The `.shz` byte layout (docs/format.md) and the rules every reader applies to it: the header
in its two layouts (formats 1-4), the container's records after it (blocks, trailers), the chain
that ties an output's frames, the seek table after them, and the listing of what a stream holds
without decoding it."""
