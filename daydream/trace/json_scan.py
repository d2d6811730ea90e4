"""A strict JSON scanner, compiled with numba, that reads a JSON array of objects (a batch of a trace's events) into
slots: for each object, the values of the keys asked for, and of the keys asked for inside one of its objects
(``args``). No Python object is made per event: a value is a tag and a number, or a span of the text.

Strict: it accepts exactly the JSON grammar (RFC 8259: literals, numbers, strings with valid escapes and UTF-8, no
control bytes, whitespace of four kinds), so that a batch cut inside an event is told from a whole one, as
:class:`~daydream.trace.batches.EventBatches` needs of a decoder. What is valid JSON but not certain here - a key
with escapes, a key twice in one object, nesting deeper than ``max_depth``, invalid UTF-8, an element that is no
object - it reports as such, and the caller reads the text with the reference decoder (msgspec), whose messages say
what is wrong where: the scanner only has to be exact on what it accepts.

Values, by tag: numbers that fit exactly (integers of int64; decimals whose digits fit in 53 bits and whose power of
ten is at most 22: one division or product of exact doubles, rounded as a correct decoder rounds) are read here;
every other number is read from its text by Python (``NUMBER_TEXT``). Strings come as an id, the same for the same
raw text (a table of 64-bit hashes, FNV-1a, whose strings are compared byte for byte), so
that the caller decodes each distinct string once; arrays and objects as their span.
"""

from __future__ import annotations

import numpy as np

from daydream._jit import jit, jit_without_runtime

# tags of a slot's value
ABSENT, NULL, FALSE, TRUE, INT, FLOAT, NUMBER_TEXT, STRING, STRING_ESCAPED, ARRAY, OBJECT = range(11)
TAG_NAMES = ("absent", "null", "false", "true", "int", "float", "number", "str", "str", "array", "object")
# what the scan of a batch came to (a count of objects >= 0 where it read them all)
NOT_JSON = -1  # not JSON: a batch cut inside an event, or malformed text
UNSURE = -2  # JSON, but not read here: the reference decoder reads it (and words what is wrong)
FULL = -3  # the string table is full: the caller grows it (Strings.grow) and scans the batch again


_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)
_EXACT_DIGITS = 1 << 53  # decimal digits below this convert to a double exactly
_EXACT_POWER = 22  # 10**22 is the largest power of ten a double holds exactly
_POWERS = np.array([float(f"1e{k}") for k in range(_EXACT_POWER + 1)])  # each exact, read by Python's parser


def key_table(keys: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Keys as the scanner matches them: their hashes, their bytes joined, each one's offsets, and a table that finds
    a key by its hash (open addressing over a power of two, a quarter full: a key is found, or known not to be one,
    in a probe or two, where an event's keys are most often not among those asked for)."""
    raw = [k.encode() for k in keys]
    data = np.frombuffer(b"".join(raw) or b"\0", np.uint8).copy()
    offsets = np.zeros(len(raw) + 1, np.int64)
    offsets[1:] = np.cumsum([len(k) for k in raw])
    hashes = np.array([string_hash(k) for k in raw], np.int64)
    size = 16
    while size < 4 * len(raw):
        size *= 2
    index = np.full(size, -1, np.int64)
    for k, h in enumerate(hashes.tolist()):
        at = h & (size - 1)
        while index[at] >= 0:
            at = (at + 1) & (size - 1)
        index[at] = k
    return hashes, data, offsets, index


def string_hash(raw: bytes) -> int:
    """The scanner's hash of a string's raw text (as a signed 64-bit integer)."""
    h = 14695981039346656037
    for b in raw:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h - (1 << 64) if h >= 1 << 63 else h


@jit_without_runtime
def _space(text, i, n):  # type: ignore[no-untyped-def]
    while i < n:
        c = text[i]
        if c != 32 and c != 10 and c != 13 and c != 9:
            return i
        i += 1
    return i


@jit_without_runtime
def _hex(c):  # type: ignore[no-untyped-def]
    return (48 <= c <= 57) or (65 <= c <= 70) or (97 <= c <= 102)


@jit_without_runtime
def _string(text, i, n):  # type: ignore[no-untyped-def]
    """The string whose opening quote is at i: (index of its closing quote, escaped, hash of its raw text), the index
    -1 where the text ends inside it or it is not valid JSON, -2 where its bytes are not valid UTF-8."""
    h = _FNV_OFFSET
    escaped = False
    j = i + 1
    while j < n:
        c = text[j]
        if c == 34:
            return j, escaped, np.int64(h)
        h = (h ^ np.uint64(c)) * _FNV_PRIME
        if c == 92:
            escaped = True
            if j + 1 >= n:
                return -1, escaped, np.int64(0)
            e = text[j + 1]
            h = (h ^ np.uint64(e)) * _FNV_PRIME
            if e == 117:  # \uXXXX
                if j + 5 >= n:
                    return -1, escaped, np.int64(0)
                for k in range(j + 2, j + 6):
                    if not _hex(text[k]):
                        return -1, escaped, np.int64(0)
                    h = (h ^ np.uint64(text[k])) * _FNV_PRIME
                j += 6
                continue
            if e != 34 and e != 92 and e != 47 and e != 98 and e != 102 and e != 110 and e != 114 and e != 116:
                return -1, escaped, np.int64(0)
            j += 2
            continue
        if c < 32:
            return -1, escaped, np.int64(0)
        if c >= 128:  # a UTF-8 sequence: its lead byte says how many continuation bytes follow, and their range
            if 0xC2 <= c <= 0xDF:
                more, lo, hi = 1, 0x80, 0xBF
            elif c == 0xE0:
                more, lo, hi = 2, 0xA0, 0xBF
            elif c == 0xED:
                more, lo, hi = 2, 0x80, 0x9F  # not the UTF-16 surrogates
            elif 0xE1 <= c <= 0xEF:
                more, lo, hi = 2, 0x80, 0xBF
            elif c == 0xF0:
                more, lo, hi = 3, 0x90, 0xBF
            elif 0xF1 <= c <= 0xF3:
                more, lo, hi = 3, 0x80, 0xBF
            elif c == 0xF4:
                more, lo, hi = 3, 0x80, 0x8F
            else:
                return -2, escaped, np.int64(0)
            if j + more >= n:
                return -1, escaped, np.int64(0)
            for k in range(1, more + 1):
                b = text[j + k]
                if k == 1:
                    if b < lo or b > hi:
                        return -2, escaped, np.int64(0)
                elif b < 0x80 or b > 0xBF:
                    return -2, escaped, np.int64(0)
                h = (h ^ np.uint64(b)) * _FNV_PRIME
            j += more + 1
            continue
        j += 1
    return -1, escaped, np.int64(0)


@jit_without_runtime
def _number(text, i, n):  # type: ignore[no-untyped-def]
    """The number starting at i: (index after it, tag, integer value, float value); the index -1 where the text is
    not a JSON number (or ends inside it)."""
    j = i
    negative = False
    if text[j] == 45:
        negative = True
        j += 1
        if j >= n:
            return -1, NUMBER_TEXT, np.int64(0), 0.0
    if not (48 <= text[j] <= 57):
        return -1, NUMBER_TEXT, np.int64(0), 0.0
    digits = np.int64(0)
    count = 0  # significant digits read (leading zeros are not)
    if text[j] == 48:
        j += 1
        if j < n and 48 <= text[j] <= 57:
            return -1, NUMBER_TEXT, np.int64(0), 0.0  # no leading zeros in JSON
    else:
        while j < n and 48 <= text[j] <= 57:
            if count < 18:
                digits = digits * 10 + (text[j] - 48)
            count += 1
            j += 1
    decimals = 0
    fraction = False
    if j < n and text[j] == 46:
        fraction = True
        j += 1
        start = j
        while j < n and 48 <= text[j] <= 57:
            if count > 0 or text[j] != 48:
                if count < 18:
                    digits = digits * 10 + (text[j] - 48)
                count += 1
            if count <= 18:
                decimals += 1
            j += 1
        if j == start:
            return -1, NUMBER_TEXT, np.int64(0), 0.0
    exponent = 0
    has_exponent = False
    if j < n and (text[j] == 101 or text[j] == 69):
        has_exponent = True
        j += 1
        esign = 1
        if j < n and (text[j] == 45 or text[j] == 43):
            esign = -1 if text[j] == 45 else 1
            j += 1
        start = j
        while j < n and 48 <= text[j] <= 57:
            if exponent < 100000:
                exponent = exponent * 10 + (text[j] - 48)
            j += 1
        if j == start:
            return -1, NUMBER_TEXT, np.int64(0), 0.0
        exponent *= esign
    if j >= n:
        return -1, NUMBER_TEXT, np.int64(0), 0.0  # a number the text ends in may go on in the next chunk
    if not fraction and not has_exponent:
        if count > 18:  # perhaps beyond int64: Python reads it
            return j, NUMBER_TEXT, np.int64(0), 0.0
        return j, INT, -digits if negative else digits, 0.0  # -0 too: an integer 0, as msgspec reads it
    if count > 18 or digits >= _EXACT_DIGITS:
        return j, NUMBER_TEXT, np.int64(0), 0.0
    power = exponent - decimals
    if power > _EXACT_POWER or power < -_EXACT_POWER:
        return j, NUMBER_TEXT, np.int64(0), 0.0
    value = float(digits) * _POWERS[power] if power >= 0 else float(digits) / _POWERS[-power]
    return j, FLOAT, np.int64(0), -value if negative else value


@jit_without_runtime
def _same_bytes(text, start, end, other, a, b):  # type: ignore[no-untyped-def]
    """Whether text[start:end] and other[a:b] hold the same bytes."""
    if b - a != end - start:
        return False
    for m in range(end - start):
        if text[start + m] != other[a + m]:
            return False
    return True


@jit_without_runtime
def _literal(text, i, n, word):  # type: ignore[no-untyped-def]
    """Whether the literal ``word`` (bytes) is at i."""
    return i + len(word) <= n and _same_bytes(text, i, i + len(word), word, 0, len(word))


@jit_without_runtime
def _slot_of(text, start, end, h, hashes, keys, offsets, index):  # type: ignore[no-untyped-def]
    """Which of the keys (:func:`key_table`) the key text[start:end] (hash h) is, or -1."""
    mask = index.shape[0] - 1
    at = h & mask
    while True:
        k = index[at]
        if k < 0:
            return -1
        if hashes[k] == h:
            return k if _same_bytes(text, start, end, keys, offsets[k], offsets[k + 1]) else -1
        at = (at + 1) & mask


@jit_without_runtime
def _intern(text, start, end, h, table, raw, raw_at, counts):  # type: ignore[no-untyped-def]
    """The id of the string text[start:end] (hash h): found in the table (open addressing over ``table``'s rows of
    hash and id), or added with the next id, its raw text appended to ``raw`` (``raw_at[id]`` its offset). -1 where
    the table, the ids or ``raw`` are full (past half the table, to keep probes short); -2 where two strings share a
    hash (the reference decoder then reads the text)."""
    mask = table.shape[0] - 1
    k = h & mask
    while True:
        sid = table[k, 1]
        if sid < 0:
            break
        if table[k, 0] == h:
            return sid if _same_bytes(text, start, end, raw, raw_at[sid], raw_at[sid + 1]) else -2
        k = (k + 1) & mask
    sid = counts[0]
    used = counts[1]
    if 2 * (sid + 1) > table.shape[0] or sid + 2 > raw_at.shape[0] or used + end - start > raw.shape[0]:
        return -1
    table[k, 0] = h
    table[k, 1] = sid
    for m in range(end - start):  # a loop, not a slice: a slice's copy allocates, and this code has no allocator
        raw[used + m] = text[start + m]
    raw_at[sid + 1] = used + end - start
    counts[0] = sid + 1
    counts[1] = used + end - start
    return sid


# what the scanner expects next
_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE, _COLON, _AFTER = range(6)
# what a container open at a depth is
_OTHER, _EVENT, _ARGS = 0, 1, 2
_TRUE = np.frombuffer(b"true", np.uint8)
_FALSE = np.frombuffer(b"false", np.uint8)
_NULL = np.frombuffer(b"null", np.uint8)


@jit
def scan(text, schema, strings, slots):  # type: ignore[no-untyped-def]
    """Scan ``text``, a JSON array of objects, into the ``slots`` (tags, ints, floats, starts, ends; a row per
    object, a column per slot). ``schema`` is (event_keys, args_keys, args_slot, allowed, max_depth): row r, slot s
    holds the value of the s-th key of ``event_keys`` in the r-th object, or (s past them) of ``args_keys`` in the
    object that the ``args_slot``-th event key holds; each key table is :func:`key_table`'s; ``allowed[s, tag]``
    the tags slot s takes (another is UNSURE); nesting past ``max_depth`` is UNSURE. ``strings`` is the table
    (:func:`_intern`'s arguments but the text) that gives a string value its id, in
    ``ints``. Returns (the number of objects or NOT_JSON / UNSURE / FULL, the byte offset where the scan stopped)."""
    max_depth = schema[4]
    kind = np.zeros(max_depth + 2, np.int8)  # per depth: 1 an object, 0 an array
    role = np.zeros(max_depth + 2, np.int8)  # per depth: what the container is (_OTHER, _EVENT, _ARGS)
    owner = np.full(max_depth + 2, -1, np.int64)  # per depth: the slot the container is the value of, or -1
    return _scan(text, schema, strings, slots, kind, role, owner)


@jit_without_runtime
def _scan(text, schema, strings, slots, kind, role, owner):  # type: ignore[no-untyped-def]
    """:func:`scan`'s loop, given its per-depth arrays (compiled without numba's runtime: nothing allocated here)."""
    event_keys, args_keys, args_slot, allowed, max_depth = schema
    tags, ints, floats, starts, ends = slots
    table, raw, raw_at, counts = strings
    e_hashes, e_keys, e_offsets, e_index = event_keys
    a_hashes, a_keys, a_offsets, a_index = args_keys
    n_event = len(e_hashes)
    n = len(text)
    rows = tags.shape[0]
    depth = 0
    row = -1
    slot = -1  # the slot the next value fills
    state = _VALUE
    i = _space(text, 0, n)
    if i >= n or text[i] != 91:
        return NOT_JSON, i
    while True:
        i = _space(text, i, n)
        if i >= n:
            return NOT_JSON, i
        c = text[i]
        if state == _VALUE_OR_CLOSE or state == _KEY_OR_CLOSE:
            if (state == _VALUE_OR_CLOSE and c == 93) or (state == _KEY_OR_CLOSE and c == 125):
                state = _AFTER  # an empty container: closed below
            else:
                state = _VALUE if state == _VALUE_OR_CLOSE else _KEY
                continue
        if state == _AFTER:
            if c == 44:
                state = _KEY if kind[depth] == 1 else _VALUE
                i += 1
                continue
            if (c == 125 and kind[depth] == 1) or (c == 93 and kind[depth] == 0):
                if owner[depth] >= 0:
                    ends[row, owner[depth]] = i + 1
                depth -= 1
                i += 1
                if depth == 0:  # the batch's array closed: nothing but whitespace may follow
                    i = _space(text, i, n)
                    return (row + 1, i) if i == n else (NOT_JSON, i)
                continue
            return NOT_JSON, i
        if state == _KEY:
            if c != 34:
                return NOT_JSON, i
            end, escaped, h = _string(text, i, n)
            if end == -2:
                return UNSURE, i
            if end < 0:
                return NOT_JSON, i
            slot = -1
            r = role[depth]
            if r != _OTHER:
                if escaped:
                    return UNSURE, i  # a key spelled with escapes: the reference decoder matches it
                if r == _EVENT:
                    slot = _slot_of(text, i + 1, end, h, e_hashes, e_keys, e_offsets, e_index)
                else:
                    slot = _slot_of(text, i + 1, end, h, a_hashes, a_keys, a_offsets, a_index)
                    if slot >= 0:
                        slot += n_event
                if slot >= 0 and tags[row, slot] != ABSENT:
                    return UNSURE, i  # a key twice in one object
            i = end + 1
            state = _COLON
            continue
        if state == _COLON:
            if c != 58:
                return NOT_JSON, i
            i += 1
            state = _VALUE
            continue
        # a value
        if c == 123 or c == 91:
            if depth == max_depth:
                return UNSURE, i
            depth += 1
            kind[depth] = 1 if c == 123 else 0
            owner[depth] = slot
            role[depth] = _OTHER
            if depth == 2:
                if c != 123:
                    return UNSURE, i  # an event that is no object
                row += 1
                if row == rows:
                    return UNSURE, i  # more events than rows given: not expected (the caller counts braces)
                for s in range(tags.shape[1]):
                    tags[row, s] = ABSENT
                role[depth] = _EVENT
                owner[depth] = -1
            elif slot >= 0:
                tag = OBJECT if c == 123 else ARRAY
                if not allowed[slot, tag]:
                    return UNSURE, i
                tags[row, slot] = tag
                starts[row, slot] = i
                if slot == args_slot and c == 123:
                    role[depth] = _ARGS
            slot = -1
            state = _KEY_OR_CLOSE if c == 123 else _VALUE_OR_CLOSE
            i += 1
            continue
        if depth == 1:
            return UNSURE, i  # an event that is no object
        if c == 34:
            end, escaped, h = _string(text, i, n)
            if end == -2:
                return UNSURE, i
            if end < 0:
                return NOT_JSON, i
            if slot >= 0:
                tag = STRING_ESCAPED if escaped else STRING
                if not allowed[slot, tag]:
                    return UNSURE, i
                sid = _intern(text, i + 1, end, h, table, raw, raw_at, counts)
                if sid == -1:
                    return FULL, i
                if sid < 0:
                    return UNSURE, i
                tags[row, slot] = tag
                ints[row, slot] = sid
            i = end + 1
        elif c == 45 or 48 <= c <= 57:
            j, tag, iv, fv = _number(text, i, n)
            if j < 0:
                return NOT_JSON, i
            if slot >= 0:
                if not allowed[slot, tag]:
                    return UNSURE, i
                tags[row, slot] = tag
                if tag == FLOAT:  # ints and floats may share their memory (a slot holds one or the other)
                    floats[row, slot] = fv
                else:
                    ints[row, slot] = iv
                starts[row, slot] = i
                ends[row, slot] = j
            i = j
        elif c == 116 or c == 102 or c == 110:  # true, false, null
            if c == 116:
                tag, word = TRUE, _TRUE
            elif c == 102:
                tag, word = FALSE, _FALSE
            else:
                tag, word = NULL, _NULL
            if not _literal(text, i, n, word):
                return NOT_JSON, i
            if slot >= 0:
                if not allowed[slot, tag]:
                    return UNSURE, i
                tags[row, slot] = tag
            i += len(word)
        else:
            return NOT_JSON, i
        slot = -1
        state = _AFTER


# how slot_columns stores a slot's values (daydream.trace.columns names them): not at all (the args object's slot),
# as string ids, as doubles, as a kind and an integer, or not here (a free-form value: Python reads its text)
SKIP, STRING_IDS, DOUBLES, SCALARS, FREE = range(5)


@jit
def slot_columns(tags, ints, floats, storage, in_args, default, kind_of):  # type: ignore[no-untyped-def]
    """The scanned slots (:func:`scan`'s tags, ints and floats, a row per object) as a column per slot, in one pass
    over the rows: slot s's values are row s of the arrays returned, its first ``counts[s]`` entries. A slot of an
    object's field has a value per object; a slot in ``args`` (``in_args``) one per object where it is neither absent
    nor null, ``rows`` saying which. By ``storage``: STRING_IDS a string's id (-1 where none; ``default[s]`` where
    absent and ``default[s] >= 0``); DOUBLES the number (NaN where none); SCALARS a kind (``kind_of[tag]``) and an
    integer: the integer, the string's id or the double's bits (0 where none; ``default[s]`` of kind ``kind_of[INT]``
    where absent and ``default[s] >= 0``). A number the scanner left as text (NUMBER_TEXT; ``texts`` counts them per
    slot) is left NaN or of kind ``kind_of[NUMBER_TEXT]``, and a FREE slot unread: the caller reads them from the
    text. Returns (present: any value, null included, per slot; counts; texts; rows; ids; doubles; kinds; integers)."""
    n, slots = tags.shape
    present = np.zeros(slots, np.bool_)
    counts = np.zeros(slots, np.int64)
    texts = np.zeros(slots, np.int64)
    # a row of each per slot, written only as far as the slot's values go (pages never written are never held)
    rows = np.empty((slots, n), np.int64)
    ids = np.empty((slots, n), np.int32)
    doubles = np.empty((slots, n), np.float64)
    kinds = np.empty((slots, n), np.int8)
    integers = np.empty((slots, n), np.int64)
    for r in range(n):
        for s in range(slots):
            t = tags[r, s]
            if t != ABSENT:
                present[s] = True
            how = storage[s]
            if how == SKIP:
                continue
            if in_args[s]:
                if t == ABSENT or t == NULL:
                    continue
                k = counts[s]
                rows[s, k] = r
            else:
                k = r
            counts[s] = k + 1
            if t == NUMBER_TEXT:
                texts[s] += 1
            if how == STRING_IDS:
                if t == STRING or t == STRING_ESCAPED:
                    ids[s, k] = ints[r, s]
                elif t == ABSENT and default[s] >= 0:
                    ids[s, k] = default[s]
                else:
                    ids[s, k] = -1
            elif how == DOUBLES:
                if t == FLOAT:
                    doubles[s, k] = floats[r, s]
                elif t == INT:
                    doubles[s, k] = float(ints[r, s])
                else:
                    doubles[s, k] = np.nan
            elif how == SCALARS:
                if t == ABSENT and default[s] >= 0:
                    kinds[s, k] = kind_of[INT]
                    integers[s, k] = default[s]
                else:
                    kinds[s, k] = kind_of[t]
                    known = t == INT or t == FLOAT or t == STRING or t == STRING_ESCAPED
                    integers[s, k] = ints[r, s] if known else 0
    return present, counts, texts, rows, ids, doubles, kinds, integers
