"""The frames of one output, in order: the rules every reader of a stream applies.

An input longer than the frame size is written as frames, each a complete archive (frames.py).
So that none can be lost, moved or taken from elsewhere unnoticed, every frame after an output's
first names the output (the crc of its first block's data), its own index and the crc of the
previous frame's data, and every frame but the last says that more follow (docs/format.md,
"Frames"). A reader passes each archive of a stream through one `Chain`: where an output starts
only a first frame may stand; after a frame that says more follow, only the next frame of the
same output; and the stream may not end while one is awaited. That is what zstd's and xz's
multi-frame streams cannot tell: a stream cut at a frame boundary, or a frame dropped, is an
error here, not a shorter output.

A seek table (seektable.py) is an index of the output it ends; a reader that meets one checks
it against the archives it has just read: a table that disagrees with them is an error.

Archives of formats 1-3, and of format 4 without frame fields (shazip 0.20's frames among them),
are each a whole output of one frame.
"""

from __future__ import annotations

from collections import deque

from ..errors import CorruptArchive, Truncated
from . import seektable
from .container import MAX_TABLE, Place

_TABLE_ENTRIES = MAX_TABLE // 16  # the most archives a seek table can list


class Chain:
    """The frames of a stream's outputs, checked one archive at a time: `begin` with an archive's
    place as its header gives it, `end` once it is read, `table` for a seek table after it,
    `close` at the end of the stream. `resume`: the reader starts at this frame (a seek into
    the middle of an output, or past a loss), whose link to the frame before cannot be checked,
    nor the seek table that ends its output (the frames before it were not read)."""

    def __init__(self, resume: Place | None = None) -> None:
        self._next = resume.index if resume else 0  # the index awaited; 0: an output's start
        self._id = resume.output_id if resume else 0
        self._link: int | None = None  # the crc of the data of the frame before, where it was decoded
        self._sizes: deque[tuple[int, int, int]] = deque(maxlen=_TABLE_ENTRIES)  # (index, archive, decoded bytes)
        self._partial = resume is not None  # the output in hand was not read from its start

    @property
    def partial(self) -> bool:
        """The output in hand, or the one just ended, was not read from its first frame."""
        return self._partial

    @property
    def between_outputs(self) -> bool:
        """No frame is awaited: the last archive ended its output (or none was read)."""
        return self._next == 0

    def begin(self, place: Place) -> None:
        """An archive starts, at `place` (as its header says; a first frame's id is not known
        yet). Raises where it cannot stand here, naming the first frame missing, repeated or
        foreign."""
        k, i = self._next, place.index
        if k == 0:
            self._partial = False
            if i:
                raise CorruptArchive(f"frame {i} of an output where an output starts (its frame"
                                     f"{'s 0-' + str(i - 1) if i > 1 else ' 0'} missing)")
            return
        if i == 0:
            raise CorruptArchive(f"frame {k} of the output is missing (another output starts where it belongs)")
        if i > k:
            raise CorruptArchive(f"frame{'s' if i > k + 1 else ''} {k}{'-' + str(i - 1) if i > k + 1 else ''} of the "
                                 f"output missing (found frame {i})")
        if i < k:
            raise CorruptArchive(f"frame {i} of the output is repeated (frame {k} belongs here)")
        if place.output_id != self._id:
            raise CorruptArchive(f"frame {k} is from another output (its id {place.output_id:08x}, this output's "
                                 f"{self._id:08x})")
        if self._link is not None and place.link != self._link:
            raise CorruptArchive(f"frame {k} does not follow frame {k - 1} (it belongs after other data: a frame "
                                 "of another output)")

    def repeats(self, place: Place) -> bool:
        """Whether an archive at `place` is a frame of the output in hand already read (one that
        `begin` refuses as repeated)."""
        return 0 < place.index < self._next and place.output_id == self._id

    def end(self, place: Place, archive_bytes: int, decoded: int, data_crc: int | None = None,
            skipped: int = 0) -> None:
        """The archive that `begin` took is read, `place` now whole (its id, `more`); `data_crc`:
        the crc of its decoded data (None: not decoded, so the next frame's link goes unchecked);
        `skipped`: the bytes of skippable frames after it, which may only stand between outputs."""
        if place.index == 0:
            self._id = place.output_id
        self._next = place.index + 1 if place.more else 0
        if skipped and self._next:
            raise CorruptArchive(f"a skippable frame where frame {self._next} of the output belongs")
        self._link = data_crc
        self._sizes.append((place.index, archive_bytes, decoded))

    def table(self, content: bytes) -> None:
        """A seek table follows the archive just ended: it must be intact, end an output, and
        list the archives just read (archive and decoded bytes), starting at an output's first."""
        entries = seektable.parse(content)
        if entries is None:
            raise CorruptArchive("the seek table after the archive is damaged")
        if not self.between_outputs:
            raise CorruptArchive(f"a seek table where frame {self._next} of the output belongs")
        if self._partial:  # (its first entries are of frames this reader did not read)
            self._sizes.clear()
            return
        n = len(entries)
        listed = list(self._sizes)[-n:] if n <= len(self._sizes) else None
        if listed is None or listed[0][0] != 0 or [(a, d) for _, a, d in listed] != entries:
            raise CorruptArchive(f"the seek table does not match the archives before it ({n} frames listed)")
        self._sizes.clear()

    def close(self) -> None:
        """The stream ends: no frame may be awaited."""
        if self._next:
            raise Truncated(f"archive is truncated: frame {self._next} of the output is missing (the file ends after "
                            f"frame {self._next - 1}, at a frame boundary)")
