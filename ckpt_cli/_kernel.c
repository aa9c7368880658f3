/* The compiled replay kernel (issue 34): the hot loop of ``ckpt replay``, and nothing else.
 *
 * - ``merge``: frame the records of decompressed HDFS-store files (deltas, snapshots) and V1/V3
 *   changelogs (``int32 BE keySize | key | int32 BE valueSize | value``, -1 a remove, -1 key
 *   size the end), and keep per key its first record's key and its last record's value,
 *   ordered by first record (applying the files in order, as Spark does); ``Merged.lookup``
 *   finds keys of another buffer among them (a RocksDB zip's keys among its changelogs').
 * - ``lz4_streams``: Spark's lz4 streams (lz4-java's LZ4Block framing) decompressed, each
 *   block checked as ``formats/compression`` checks it.
 * - ``sst_records``: the entries of decompressed SST data blocks (``formats/sst`` checks and
 *   decompresses the blocks), each key rebuilt from the one before it.
 * - ``Format``: UnsafeRows of one store's schema straight into JSON lines and CSV rows, the
 *   bytes ``replay/columns`` and ``replay/csv_arrow`` write for them.
 *
 * The Python side decides everything else: plans, decompression, schemas, errors. Whatever
 * this file cannot vouch for it hands back (None): a file that does not frame, a damaged
 * row, a value whose text the reference path makes differently (a non-finite float, a year
 * outside 1-9999, invalid UTF-8), keys whose hashes pile up. The numpy/Arrow path then does
 * it, and names any problem. Every length and offset is checked as ``formats/records``,
 * ``formats/record_frames``, ``formats/sst`` and ``formats/unsaferow_arrow`` check them. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#ifndef KERNEL_SOURCE
#define KERNEL_SOURCE "unknown"
#endif

#include "structmember.h"
/* Ryu (the shortest decimal that reads back as the same double): vendor/ryu.h. */
#include "vendor/ryu.h"

/* ---- small helpers ----------------------------------------------------------------------- */

#define MAX_RECORD_BYTES (1 << 28) /* formats/records.MAX_RECORD_BYTES */
#define MAX_PROBE 4096             /* keys whose hashes pile up: the reference path merges */
#define MAX_KEYS 0xFFFFFFF0u       /* key ids live in 32 bits of a slot */

enum { OK = 0, BAIL = 1, NOMEM = -1, ROOM = 2 /* keys outgrew the room given them */ };

static inline uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline int64_t rdi64(const uint8_t *p) { int64_t v; memcpy(&v, p, 8); return v; }
static inline int32_t rdi32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline int16_t rdi16(const uint8_t *p) { int16_t v; memcpy(&v, p, 2); return v; }
static inline float rdf32(const uint8_t *p) { float v; memcpy(&v, p, 4); return v; }
static inline double rdf64(const uint8_t *p) { double v; memcpy(&v, p, 8); return v; }
static inline int32_t be32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

/* An index array from Python (numpy int32 or int64, C-contiguous). */
typedef struct {
    Py_buffer view;
    Py_ssize_t n;
    int wide;
} Ints;

static int ints_get(PyObject *obj, Ints *out, const char *what) {
    if (PyObject_GetBuffer(obj, &out->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    Py_ssize_t size = out->view.itemsize;
    const char *f = out->view.format ? out->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    int integer = f[0] != '\0' && f[1] == '\0' && strchr("ilqn", f[0]) != NULL;
    if (out->view.ndim > 1 || !integer || (size != 4 && size != 8)) {
        PyErr_Format(PyExc_TypeError, "%s: an int32 or int64 array is needed", what);
        PyBuffer_Release(&out->view);
        return -1;
    }
    out->wide = size == 8;
    out->n = out->view.len / size;
    return 0;
}

static inline int64_t ints_at(const Ints *a, Py_ssize_t i) {
    return a->wide ? ((const int64_t *)a->view.buf)[i] : ((const int32_t *)a->view.buf)[i];
}

/* A buffer and ``count`` index arrays of one length (``differ``: the error where they are
 * not): 0, or -1 with an error set and nothing held. */
static int arrays_get(PyObject *data_obj, Py_buffer *data, PyObject *const *objs, Ints *a,
                      int count, const char *const *what, const char *differ) {
    if (PyObject_GetBuffer(data_obj, data, PyBUF_SIMPLE) < 0) return -1;
    int got = 0;
    for (; got < count; got++)
        if (ints_get(objs[got], &a[got], what[got]) < 0) break;
    if (got == count) {
        int same = 1;
        for (int i = 1; i < count; i++) same &= a[i].n == a[0].n;
        if (same) return 0;
        PyErr_SetString(PyExc_ValueError, differ);
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&a[i].view);
    PyBuffer_Release(data);
    return -1;
}

static void arrays_release(Py_buffer *data, Ints *a, int count) {
    for (int i = 0; i < count; i++) PyBuffer_Release(&a[i].view);
    PyBuffer_Release(data);
}

/* The arrays of a batch of records, as ``arrays_get`` gets them. */
static const char *const RECORD_ARRAYS[4] = {"key offsets", "key sizes", "value offsets",
                                             "value sizes"};
static const char *const HANDLE_ARRAYS[2] = {"offsets", "sizes"};

/* Asks for transparent huge pages under a large buffer about to be written: a fresh 2 MB page
 * faults in once instead of 512 times (a 10M-key state's 720 MB: a third of decompressing
 * it was page faults). A hint; where it is not taken, nothing changes. */
static void huge_pages(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t page = (uintptr_t)2 << 20;
    uintptr_t start = ((uintptr_t)p + page - 1) & ~(page - 1), end = ((uintptr_t)p + n) & ~(page - 1);
    if (end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

/* ---- Column: memory of this module as a Python buffer (numpy.frombuffer reads it) ----------- */

typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t n;
    Py_ssize_t itemsize;
    Py_ssize_t shape;
    Py_ssize_t stride;
    char format[2];
} Column;

static void column_dealloc(Column *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int column_getbuffer(Column *self, Py_buffer *view, int flags) {
    self->shape = self->n;
    self->stride = self->itemsize;
    view->obj = (PyObject *)self;
    Py_INCREF(self);
    view->buf = self->data;
    view->len = self->n * self->itemsize;
    view->readonly = 0;
    view->itemsize = self->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? self->format : NULL;
    view->ndim = 1;
    view->shape = (flags & PyBUF_ND) ? &self->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) ? &self->stride : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static Py_ssize_t column_len(Column *self) { return self->n; }

static PyBufferProcs column_as_buffer = {(getbufferproc)column_getbuffer, NULL};
static PySequenceMethods column_as_sequence = {.sq_length = (lenfunc)column_len};

static PyTypeObject ColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ckpt_cli._kernel.Column",
    .tp_basicsize = sizeof(Column),
    .tp_dealloc = (destructor)column_dealloc,
    .tp_as_buffer = &column_as_buffer,
    .tp_as_sequence = &column_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An array made by the kernel (a buffer of int64, int32 or uint8).",
};

/* A Column owning ``data`` (malloc'd, freed with it), or NULL (and ``data`` freed). */
static PyObject *column_of(void *data, Py_ssize_t n, Py_ssize_t itemsize, char format) {
    Column *c = PyObject_New(Column, &ColumnType);
    if (c == NULL) {
        free(data);
        return NULL;
    }
    if (data == NULL) data = malloc(1); /* a zero-length buffer still points somewhere */
    c->data = data;
    c->n = n;
    c->itemsize = itemsize;
    c->format[0] = format;
    c->format[1] = '\0';
    if (data == NULL) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    return (PyObject *)c;
}

/* ---- hashing -------------------------------------------------------------------------------
 * A keyed hash (wyhash's multiply-fold), its seed drawn by the Python side at import: the
 * table's layout cannot be chosen by whoever wrote the keys, and a probe longer than
 * MAX_PROBE hands the merge back to the reference path anyway. */

static uint64_t seed0 = 0x2d358dccaa6c78a5ull, seed1 = 0x8bb84b93962eacc9ull;
static uint64_t hash_bits = ~0ull; /* tests make keys collide by clearing bits */

static inline uint64_t fold(uint64_t a, uint64_t b) {
    uint128_t r = (uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t hash_key(const uint8_t *p, size_t n) {
    uint64_t h = seed0 ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull);
    while (n >= 16) {
        h = fold(rd64(p) ^ seed1, rd64(p + 8) ^ h);
        p += 16;
        n -= 16;
    }
    if (n >= 8) {
        h = fold(rd64(p) ^ seed1, h ^ 0xa0761d6478bd642full);
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t t = 0;
        memcpy(&t, p, n);
        h = fold(t ^ 0xe7037ed1a0b428dbull, h ^ seed1);
    }
    return fold(h ^ 0x8ebc6af09c88c6e3ull, h ^ seed0 ^ 0x589965cc75374cc3ull) & hash_bits;
}

/* ---- merge --------------------------------------------------------------------------------- */

/* Keys by first record, each with its last record's value; a table of (hash tag, id + 1). */
typedef struct {
    int64_t *koff, *voff;
    int32_t *ksz, *vsz;
    size_t n, cap;
    uint64_t *slots;
    size_t nslots;
} Build;

static void build_free(Build *b) {
    free(b->koff);
    free(b->voff);
    free(b->ksz);
    free(b->vsz);
    free(b->slots);
    memset(b, 0, sizeof *b);
}

/* The id of the key ``key`` (``ks`` bytes) among those of ``base``, -1 when it is not there
 * (``*at``: the empty slot it would take), -2 when the probe ran past MAX_PROBE. */
static inline int64_t table_find(const uint64_t *slots, size_t nslots, uint64_t h,
                                 const uint8_t *key, int64_t ks, const uint8_t *base,
                                 const int64_t *koff, const int32_t *ksz, size_t *at) {
    size_t mask = nslots - 1, i = (size_t)h & mask;
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t probes = 0; probes <= MAX_PROBE; probes++) {
        uint64_t s = slots[i];
        if (s == 0) {
            *at = i;
            return -1;
        }
        if ((uint32_t)(s >> 32) == tag) {
            uint32_t id = (uint32_t)s - 1;
            if (ksz[id] == ks && memcmp(base + koff[id], key, (size_t)ks) == 0) return id;
        }
        i = (i + 1) & mask;
    }
    return -2;
}

/* One record of ``buf[*pos:end]``, as ``formats/record_frames.frame`` takes them: OK (and
 * ``*pos`` past it), END at the -1 end marker, BAIL where frame gives None (truncated, a size
 * out of bounds, a remove in a snapshot, another end marker). */
enum { END = 2 };

typedef struct {
    int64_t koff, voff;
    int32_t ks, vs;
    uint64_t h;
} Record;

static inline int frame_next(const uint8_t *buf, int64_t *pos, int64_t end, int snapshot,
                             Record *r) {
    int64_t at = *pos;
    if (end - at < 4) return BAIL;
    int32_t ks = be32(buf + at);
    if (ks < 0) return ks == -1 ? END : BAIL;
    if (ks > MAX_RECORD_BYTES || end - at - 8 < ks) return BAIL;
    int32_t vs = be32(buf + at + 4 + ks);
    if (vs > MAX_RECORD_BYTES || vs < (snapshot ? 0 : -1)) return BAIL;
    r->koff = at + 4;
    r->voff = at + 8 + ks;
    r->ks = ks;
    r->vs = vs;
    int64_t next = r->voff + (vs > 0 ? vs : 0);
    if (next > end) return BAIL;
    *pos = next;
    return OK;
}

/* How many records ``buf[start:end]`` frames to (BAIL where it does not frame). */
static int count_records(const uint8_t *buf, int64_t start, int64_t end, int snapshot,
                         size_t *count) {
    Record r;
    int rc;
    while ((rc = frame_next(buf, &start, end, snapshot, &r)) == OK) (*count)++;
    return rc == END ? OK : BAIL;
}

static inline void build_push(Build *b, const Record *r) {
    b->koff[b->n] = r->koff;
    b->ksz[b->n] = r->ks;
    b->voff[b->n] = r->voff;
    b->vsz[b->n] = r->vs;
    b->n++;
}

/* Records framed this far ahead of the one merged: their slots are fetched from memory (a
 * table of millions of keys is mostly cache misses) while the records before them merge. */
#define AHEAD 16

/* The records of one segment into ``b`` (sized for every record of every segment: no growth
 * here), each key once with ``dedupe``. */
static int merge_segment(Build *b, const uint8_t *buf, int64_t start, int64_t end, int snapshot,
                         int dedupe) {
    Record ring[AHEAD];
    int head = 0, pending = 0, rc = OK;
    int64_t pos = start;
    size_t mask = b->nslots - 1;
    for (;;) {
        while (rc == OK && pending < AHEAD) {
            Record *r = &ring[(head + pending) % AHEAD];
            rc = frame_next(buf, &pos, end, snapshot, r);
            if (rc != OK) break;
            if (dedupe) {
                r->h = hash_key(buf + r->koff, (size_t)r->ks);
                __builtin_prefetch(&b->slots[(size_t)r->h & mask]);
            }
            pending++;
        }
        if (rc == BAIL) return BAIL; /* counted before: not reached */
        if (pending == 0) return OK;
        const Record *r = &ring[head];
        head = (head + 1) % AHEAD;
        pending--;
        if (b->n >= b->cap) return BAIL; /* more records than counted: not reached */
        if (dedupe) {
            size_t at = 0;
            int64_t id = table_find(b->slots, b->nslots, r->h, buf + r->koff, r->ks, buf,
                                    b->koff, b->ksz, &at);
            if (id == -2) return BAIL;
            if (id >= 0) {
                b->voff[id] = r->voff;
                b->vsz[id] = r->vs;
                continue;
            }
            b->slots[at] = ((r->h >> 32) << 32) | (uint64_t)(b->n + 1);
        }
        build_push(b, r);
    }
}

/* Arrays for ``records`` keys and, with ``dedupe``, a table at most half full. */
static int build_alloc(Build *b, size_t records, int dedupe) {
    size_t cap = records ? records : 1;
    b->koff = malloc(cap * 8);
    b->voff = malloc(cap * 8);
    b->ksz = malloc(cap * 4);
    b->vsz = malloc(cap * 4);
    b->cap = cap;
    if (!b->koff || !b->voff || !b->ksz || !b->vsz) return NOMEM;
    if (dedupe) {
        size_t nslots = (size_t)1 << 13;
        while (nslots < 2 * records) nslots *= 2;
        b->slots = calloc(nslots, sizeof *b->slots);
        if (b->slots == NULL) return NOMEM;
        huge_pages(b->slots, nslots * sizeof *b->slots); /* probed at random: fewer TLB misses */
        b->nslots = nslots;
    }
    return OK;
}

typedef struct {
    PyObject_HEAD
    PyObject *key_offsets, *key_sizes, *value_offsets, *value_sizes, *used;
    /* Kept for lookup (changelogs): the buffer, the table, the columns' memory. */
    Py_buffer view;
    int has_view;
    uint64_t *slots;
    size_t nslots;
    Py_ssize_t n;
} Merged;

static void merged_dealloc(Merged *self) {
    Py_XDECREF(self->key_offsets);
    Py_XDECREF(self->key_sizes);
    Py_XDECREF(self->value_offsets);
    Py_XDECREF(self->value_sizes);
    Py_XDECREF(self->used);
    if (self->has_view) PyBuffer_Release(&self->view);
    free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t merged_len(Merged *self) { return self->n; }

static PyObject *merged_lookup(Merged *self, PyObject *args) {
    PyObject *data_obj, *off_obj, *size_obj;
    if (!PyArg_ParseTuple(args, "OOO:lookup", &data_obj, &off_obj, &size_obj)) return NULL;
    if (!self->has_view) {
        PyErr_SetString(PyExc_ValueError, "lookup needs a merge that kept its removes");
        return NULL;
    }
    Py_buffer data;
    Ints a[2];
    PyObject *objs[2] = {off_obj, size_obj};
    if (arrays_get(data_obj, &data, objs, a, 2, HANDLE_ARRAYS,
                   "offsets and sizes differ in length") < 0)
        return NULL;
    const Ints *off = &a[0], *size = &a[1];
    PyObject *result = NULL;
    Py_ssize_t n = off->n;
    int64_t *found = malloc((size_t)(n ? n : 1) * sizeof *found);
    if (found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *buf = data.buf, *base = self->view.buf;
    const int64_t *koff = ((Column *)self->key_offsets)->data;
    const int32_t *ksz = ((Column *)self->key_sizes)->data;
    uint8_t *used = ((Column *)self->used)->data;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    /* Most keys are not among the merged ones, and each probe of the table is a cache miss:
     * key j is hashed, and its slot prefetched, AHEAD keys before it is probed (as i). */
    size_t mask = self->nslots ? self->nslots - 1 : 0;
    uint64_t hs[AHEAD];
    for (Py_ssize_t j = 0; j < n + AHEAD; j++) {
        Py_ssize_t i = j - AHEAD; /* probed first: key j takes its place in the ring after */
        if (i >= 0) {
            int64_t at = ints_at(off, i), ks = ints_at(size, i);
            size_t slot;
            int64_t id = self->nslots == 0 ? -1 /* nothing merged */
                         : table_find(self->slots, self->nslots, hs[i % AHEAD], buf + at, ks,
                                      base, koff, ksz, &slot);
            /* -2: not within MAX_PROBE of its place, where every key was put: not there. */
            found[i] = id >= 0 ? id : -1;
            if (id >= 0) used[id] = 1;
        }
        if (j < n) {
            int64_t at = ints_at(off, j), ks = ints_at(size, j);
            if (at < 0 || ks < 0 || at > data.len - ks) {
                bad = 1;
                break;
            }
            hs[j % AHEAD] = hash_key(buf + at, (size_t)ks);
            if (self->nslots) __builtin_prefetch(&self->slots[(size_t)hs[j % AHEAD] & mask]);
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        free(found);
        PyErr_SetString(PyExc_ValueError, "a key lies outside its buffer");
        goto done;
    }
    result = column_of(found, n, 8, 'q');
done:
    arrays_release(&data, a, 2);
    return result;
}

static PyMethodDef merged_methods[] = {
    {"lookup", (PyCFunction)merged_lookup, METH_VARARGS,
     "lookup(data, offsets, sizes) -> Column of int64: per key of ``data``, the index of the "
     "same key among the merged ones, or -1; marks those found in ``used``."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef merged_members[] = {
    {"key_offsets", T_OBJECT, offsetof(Merged, key_offsets), READONLY, "int64 Column"},
    {"key_sizes", T_OBJECT, offsetof(Merged, key_sizes), READONLY, "int32 Column"},
    {"value_offsets", T_OBJECT, offsetof(Merged, value_offsets), READONLY, "int64 Column"},
    {"value_sizes", T_OBJECT, offsetof(Merged, value_sizes), READONLY, "int32 Column (-1 a remove)"},
    {"used", T_OBJECT, offsetof(Merged, used), READONLY, "uint8 Column, or None"},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods merged_as_sequence = {.sq_length = (lenfunc)merged_len};

static PyTypeObject MergedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ckpt_cli._kernel.Merged",
    .tp_basicsize = sizeof(Merged),
    .tp_dealloc = (destructor)merged_dealloc,
    .tp_as_sequence = &merged_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = merged_methods,
    .tp_members = merged_members,
    .tp_doc = "The records a merge kept: keys by first record, each with its last value.",
};

static PyObject *kernel_merge(PyObject *module, PyObject *args) {
    PyObject *data_obj, *segments_obj;
    int dedupe, keep_removes;
    if (!PyArg_ParseTuple(args, "OOpp:merge", &data_obj, &segments_obj, &dedupe, &keep_removes))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data_obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *seq = PySequence_Fast(segments_obj, "segments must be a sequence");
    if (seq == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t nseg = PySequence_Fast_GET_SIZE(seq);
    int64_t *seg = malloc((size_t)(nseg ? nseg : 1) * 3 * sizeof *seg);
    if (seg == NULL) {
        Py_DECREF(seq);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nseg; i++) {
        long long start, end;
        int snapshot;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "LLp;a segment is (start, end, "
                              "snapshot)", &start, &end, &snapshot) ||
            start < 0 || end < start || end > view.len) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a segment lies outside the buffer");
            free(seg);
            Py_DECREF(seq);
            PyBuffer_Release(&view);
            return NULL;
        }
        seg[3 * i] = start;
        seg[3 * i + 1] = end;
        seg[3 * i + 2] = snapshot;
    }
    Py_DECREF(seq);

    Build b;
    memset(&b, 0, sizeof b);
    int rc = OK;
    size_t records = 0;
    const uint8_t *buf = view.buf;
    Py_BEGIN_ALLOW_THREADS
    /* Framed once to count (and to fail before any memory is taken), then merged. */
    for (Py_ssize_t i = 0; i < nseg && rc == OK; i++)
        rc = count_records(buf, seg[3 * i], seg[3 * i + 1], (int)seg[3 * i + 2], &records);
    if (rc == OK && records > MAX_KEYS) rc = BAIL;
    if (rc == OK) rc = build_alloc(&b, records, dedupe);
    for (Py_ssize_t i = 0; i < nseg && rc == OK; i++)
        rc = merge_segment(&b, buf, seg[3 * i], seg[3 * i + 1], (int)seg[3 * i + 2], dedupe);
    if (rc == OK && !keep_removes) { /* removes go, the order stays */
        size_t kept = 0;
        for (size_t i = 0; i < b.n; i++) {
            if (b.vsz[i] < 0) continue;
            b.koff[kept] = b.koff[i];
            b.ksz[kept] = b.ksz[i];
            b.voff[kept] = b.voff[i];
            b.vsz[kept] = b.vsz[i];
            kept++;
        }
        b.n = kept;
    }
    Py_END_ALLOW_THREADS
    free(seg);
    if (rc != OK) {
        build_free(&b);
        PyBuffer_Release(&view);
        if (rc == NOMEM) return PyErr_NoMemory();
        Py_RETURN_NONE;
    }
    Merged *m = PyObject_New(Merged, &MergedType);
    if (m == NULL) {
        build_free(&b);
        PyBuffer_Release(&view);
        return NULL;
    }
    m->key_offsets = m->key_sizes = m->value_offsets = m->value_sizes = m->used = NULL;
    m->has_view = 0;
    m->slots = NULL;
    m->nslots = 0;
    m->n = (Py_ssize_t)b.n;
    /* The columns own the arrays from here on (shrunk to their length). */
    size_t n = b.n ? b.n : 1;
    void *koff = realloc(b.koff, n * 8), *voff = realloc(b.voff, n * 8);
    void *ksz = realloc(b.ksz, n * 4), *vsz = realloc(b.vsz, n * 4);
    koff = koff ? koff : b.koff;
    voff = voff ? voff : b.voff;
    ksz = ksz ? ksz : b.ksz;
    vsz = vsz ? vsz : b.vsz;
    m->key_offsets = column_of(koff, m->n, 8, 'q');
    m->key_sizes = column_of(ksz, m->n, 4, 'i');
    m->value_offsets = column_of(voff, m->n, 8, 'q');
    m->value_sizes = column_of(vsz, m->n, 4, 'i');
    if (keep_removes && dedupe) {
        m->used = column_of(calloc(n, 1), m->n, 1, 'B');
        m->slots = b.slots;
        m->nslots = b.nslots;
        m->view = view;
        m->has_view = 1;
    } else {
        free(b.slots);
        PyBuffer_Release(&view);
        Py_INCREF(Py_None);
        m->used = Py_None;
    }
    if (!m->key_offsets || !m->key_sizes || !m->value_offsets || !m->value_sizes || !m->used) {
        Py_DECREF(m);
        return NULL;
    }
    return (PyObject *)m;
}

/* ---- Spark's lz4 streams ---------------------------------------------------------------------
 * ``formats/compression._lz4`` in one pass without the GIL: lz4-java ``LZ4BlockOutputStream``
 * blocks (``LZ4Block`` magic, token, compressed and original lengths, xxhash32 of the block's
 * bytes with seed 0x9747b28c masked to 28 bits), several streams possibly one after another,
 * the output held to the same inflation limits after each block. Each block is decoded as
 * lz4 1.9's ``LZ4_decompress_safe`` decodes (the library python-lz4 carries), at least as
 * strictly; whatever ``_lz4`` would raise for, or is unsure of, this hands back (None) and
 * the Python reader reads the file and names the problem. */

#define XXH_P1 2654435761U
#define XXH_P2 2246822519U
#define XXH_P3 3266489917U
#define XXH_P4 668265263U
#define XXH_P5 374761393U
#define LZ4_SEED 0x9747B28CU
#define LZ4_HEADER 21

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static inline uint32_t rd_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint32_t xxh32(const uint8_t *p, size_t len, uint32_t seed) {
    size_t i = 0;
    uint32_t h;
    if (len >= 16) {
        uint32_t v1 = seed + XXH_P1 + XXH_P2, v2 = seed + XXH_P2, v3 = seed, v4 = seed - XXH_P1;
        for (; len - i >= 16; i += 16) {
            v1 = rotl32(v1 + rd_le32(p + i) * XXH_P2, 13) * XXH_P1;
            v2 = rotl32(v2 + rd_le32(p + i + 4) * XXH_P2, 13) * XXH_P1;
            v3 = rotl32(v3 + rd_le32(p + i + 8) * XXH_P2, 13) * XXH_P1;
            v4 = rotl32(v4 + rd_le32(p + i + 12) * XXH_P2, 13) * XXH_P1;
        }
        h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18);
    } else {
        h = seed + XXH_P5;
    }
    h += (uint32_t)len;
    for (; len - i >= 4; i += 4) h = rotl32(h + rd_le32(p + i) * XXH_P3, 17) * XXH_P4;
    for (; i < len; i++) h = rotl32(h + p[i] * XXH_P5, 11) * XXH_P1;
    h ^= h >> 15;
    h *= XXH_P2;
    h ^= h >> 13;
    h *= XXH_P3;
    h ^= h >> 16;
    return h;
}

/* One lz4 block into exactly ``cap`` bytes: 0, or -1 where LZ4_decompress_safe fails or
 * would produce another length (sizes, not pointers, so no bound is ever computed past an
 * end). */
static int lz4_block(const uint8_t *src, size_t srclen, uint8_t *dst, size_t cap) {
    if (cap == 0) return (srclen == 1 && src[0] == 0) ? 0 : -1;
    size_t ip = 0, op = 0;
    for (;;) {
        if (ip >= srclen) return -1;
        unsigned token = src[ip++];
        size_t length = token >> 4;
        if (length == 15) { /* read_variable_length(&ip, iend - RUN_MASK, 1) */
            if (srclen < 15 || ip >= srclen - 15) return -1;
            unsigned s;
            do {
                s = src[ip++];
                length += s;
                if (ip > srclen - 15) return -1;
            } while (s == 255);
        }
        /* Literals: the last sequence when they reach the last 12 bytes of the output or the
         * last 8 of the input; it must end the input exactly and fit the output. */
        if (length <= 16 && cap - op >= 64 && srclen - ip >= 64) {
            /* the common short run, far from both ends: one 16-byte copy (the bytes past
             * ``length`` are written over by what follows) */
            memcpy(dst + op, src + ip, 16);
            ip += length;
            op += length;
        } else if (length > cap - op || cap - op - length < 12 || length > srclen - ip ||
            srclen - ip - length < 8) {
            if (length != srclen - ip || length > cap - op) return -1;
            memcpy(dst + op, src + ip, length);
            op += length;
            break;
        } else {
            memcpy(dst + op, src + ip, length);
            ip += length;
            op += length;
        }
        /* A match: its offset (not 0, not before the output's start), its length. */
        size_t offset = (size_t)src[ip] | ((size_t)src[ip + 1] << 8);
        ip += 2;
        if (offset == 0 || offset > op) return -1;
        length = token & 15;
        if (length == 15) { /* read_variable_length(&ip, iend - LASTLITERALS + 1, 0) */
            unsigned s;
            do {
                if (ip >= srclen) return -1;
                s = src[ip++];
                length += s;
                if (srclen < 4 || ip > srclen - 4) return -1;
            } while (s == 255);
        }
        length += 4;
        /* The last 5 bytes of a block are always literals. */
        if (length > cap - op || cap - op - length < 5) return -1;
        const uint8_t *from = dst + op - offset;
        uint8_t *to = dst + op;
        if (offset >= 16 && length <= 32 && cap - op >= 64) {
            /* far from the end, and no overlap within a 16-byte step */
            memcpy(to, from, 16);
            memcpy(to + 16, from + 16, 16);
        } else if (offset >= length) {
            memcpy(to, from, length);
        } else {
            for (size_t k = 0; k < length; k++) to[k] = from[k];
        }
        op += length;
    }
    return op == cap ? 0 : -1;
}

typedef struct {
    double ratio;
    int64_t floor;
    int64_t max_bytes;
} InflationLimits;

static inline int64_t allowed_bytes(const InflationLimits *l, int64_t compressed) {
    /* Limits.allowed: min(max_bytes, max(floor, int(ratio * compressed))). */
    double by_ratio_d = l->ratio * (double)compressed;
    int64_t by_ratio = by_ratio_d >= 9.2e18 ? INT64_MAX : (int64_t)by_ratio_d;
    if (by_ratio < l->floor) by_ratio = l->floor;
    return by_ratio < l->max_bytes ? by_ratio : l->max_bytes;
}

/* The blocks of one file: their output size (pass 1, ``out`` NULL: headers and limits only)
 * or their bytes into ``out`` (pass 2). OK, or BAIL where ``_lz4`` would raise. */
static int lz4_file(const uint8_t *p, size_t n, uint8_t *out, int64_t *produced,
                    const InflationLimits *limits) {
    static const uint8_t magic[8] = {'L', 'Z', '4', 'B', 'l', 'o', 'c', 'k'};
    if (n < 8 || memcmp(p, magic, 8) != 0) return BAIL; /* not an lz4 stream: the caller's */
    size_t at = 0;
    int64_t total = 0;
    while (at < n) {
        if (n - at < LZ4_HEADER || memcmp(p + at, magic, 8) != 0) return BAIL;
        unsigned token = p[at + 8];
        int32_t compressed = (int32_t)rd_le32(p + at + 9);
        int32_t original = (int32_t)rd_le32(p + at + 13);
        uint32_t checksum = rd_le32(p + at + 17);
        unsigned method = token & 0xF0, level = token & 0x0F;
        if ((method != 0x10 && method != 0x20) || level > 15) return BAIL;
        int64_t block = (int64_t)1 << (level + 10);
        if (original < 0 || compressed < 0 || original > block ||
            compressed > block + block / 255 + 16 || (original == 0) != (compressed == 0) ||
            (method == 0x10 && original != compressed))
            return BAIL;
        at += LZ4_HEADER;
        if (original == 0) {
            if (checksum != 0) return BAIL;
            continue; /* an end mark; another stream may follow */
        }
        if ((size_t)compressed > n - at) return BAIL;
        const uint8_t *payload = p + at;
        at += (size_t)compressed;
        total += original;
        /* Held to the limits after each block, as ``_bounded`` holds the Python reader. */
        if (total > allowed_bytes(limits, (int64_t)at)) return BAIL;
        if (out != NULL) {
            uint8_t *dst = out + *produced;
            if (method == 0x10) {
                memcpy(dst, payload, (size_t)original);
            } else if (lz4_block(payload, (size_t)compressed, dst, (size_t)original) != 0) {
                return BAIL;
            }
            if ((xxh32(dst, (size_t)original, LZ4_SEED) & 0x0FFFFFFFU) != checksum) return BAIL;
            *produced += original;
        }
    }
    if (out == NULL) *produced += total;
    return OK;
}

static PyObject *kernel_lz4_streams(PyObject *module, PyObject *args) {
    PyObject *files_obj;
    InflationLimits limits;
    long long floor, max_bytes;
    if (!PyArg_ParseTuple(args, "OdLL:lz4_streams", &files_obj, &limits.ratio, &floor,
                          &max_bytes))
        return NULL;
    limits.floor = floor;
    limits.max_bytes = max_bytes;
    PyObject *seq = PySequence_Fast(files_obj, "files must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t nfiles = PySequence_Fast_GET_SIZE(seq);
    Py_buffer *views = calloc((size_t)(nfiles ? nfiles : 1), sizeof *views);
    int64_t *ends = malloc((size_t)(nfiles ? nfiles : 1) * sizeof *ends);
    Py_ssize_t got = 0;
    PyObject *result = NULL;
    if (views == NULL || ends == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < nfiles; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got], PyBUF_SIMPLE) < 0)
            goto done;
    }
    int rc = OK;
    int64_t total = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nfiles && rc == OK; i++) {
        rc = lz4_file(views[i].buf, (size_t)views[i].len, NULL, &total, &limits);
        ends[i] = total;
    }
    Py_END_ALLOW_THREADS
    if (rc != OK || total > PY_SSIZE_T_MAX) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (data == NULL) goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
    huge_pages(out, (size_t)total);
    int64_t produced = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nfiles && rc == OK; i++)
        rc = lz4_file(views[i].buf, (size_t)views[i].len, out, &produced, &limits);
    Py_END_ALLOW_THREADS
    if (rc != OK || produced != total) {
        Py_DECREF(data);
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    PyObject *offsets = PyList_New(nfiles);
    if (offsets == NULL) {
        Py_DECREF(data);
        goto done;
    }
    for (Py_ssize_t i = 0; i < nfiles; i++) {
        PyObject *end = PyLong_FromLongLong(ends[i]);
        if (end == NULL) {
            Py_DECREF(offsets);
            Py_DECREF(data);
            goto done;
        }
        PyList_SET_ITEM(offsets, i, end);
    }
    result = Py_BuildValue("(NN)", data, offsets);
done:
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    free(views);
    free(ends);
    Py_DECREF(seq);
    return result;
}

/* ---- SST data blocks ------------------------------------------------------------------------
 * ``formats/sst.block_records`` in one pass: the entries of consecutive decompressed data
 * blocks (``shared, non_shared, value_length`` varint32s, the key's own bytes, the value;
 * restart offsets and their count at each block's end), each key rebuilt from the one before
 * it. Whatever that function raises FormatError for, this hands back (None), and it raises. */

static inline uint32_t rd_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* A varint of at most 5 bytes at ``*at``, ending before ``limit``. */
static inline int varint32(const uint8_t *buf, size_t *at, size_t limit, uint64_t *value) {
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (*at >= limit) return BAIL;
        uint8_t byte = buf[(*at)++];
        v |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (byte < 0x80) {
            *value = v;
            return OK;
        }
    }
    return BAIL;
}

typedef struct {
    int64_t *koff, *ksz, *voff, *vsz;
    uint8_t *kinds, *repeats;
    size_t n, cap;
    uint8_t *keys; /* every key whole, one after another */
    size_t keys_len, keys_cap;
    int keys_fixed; /* ``keys`` is memory of the caller's: ROOM instead of growing it */
    size_t first_cap; /* entries to make room for at first (0: 4,096) */
} Entries;

static void entries_free(Entries *e) {
    free(e->koff);
    free(e->ksz);
    free(e->voff);
    free(e->vsz);
    free(e->kinds);
    free(e->repeats);
    if (!e->keys_fixed) free(e->keys);
    memset(e, 0, sizeof *e);
}

static int entries_reserve(Entries *e, size_t key_bytes) {
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : e->first_cap ? e->first_cap : 4096;
        void *p;
        if ((p = realloc(e->koff, cap * 8)) == NULL) return NOMEM;
        e->koff = p;
        if ((p = realloc(e->ksz, cap * 8)) == NULL) return NOMEM;
        e->ksz = p;
        if ((p = realloc(e->voff, cap * 8)) == NULL) return NOMEM;
        e->voff = p;
        if ((p = realloc(e->vsz, cap * 8)) == NULL) return NOMEM;
        e->vsz = p;
        if ((p = realloc(e->kinds, cap)) == NULL) return NOMEM;
        e->kinds = p;
        if ((p = realloc(e->repeats, cap)) == NULL) return NOMEM;
        e->repeats = p;
        e->cap = cap;
    }
    if (e->keys_cap - e->keys_len < key_bytes) {
        if (e->keys_fixed) return ROOM;
        size_t cap = e->keys_cap ? e->keys_cap : 1 << 16;
        while (cap - e->keys_len < key_bytes) cap *= 2;
        void *p = realloc(e->keys, cap);
        if (p == NULL) return NOMEM;
        e->keys = p;
        e->keys_cap = cap;
    }
    return OK;
}

static int decode_blocks(const uint8_t *buf, const int64_t *sizes, Py_ssize_t nblocks,
                         Entries *e) {
    size_t base = 0;
    int have_prev = 0;
    for (Py_ssize_t b = 0; b < nblocks; b++) {
        size_t size = (size_t)sizes[b];
        if (size < 4) return BAIL;
        uint32_t count = rd_u32le(buf + base + size - 4);
        if (count >> 31) return BAIL; /* a hash index */
        if (count == 0 || (uint64_t)4 * count + 4 > size) return BAIL;
        size_t end = size - 4 - 4 * (size_t)count;
        const uint8_t *restarts = buf + base + end;
        for (uint32_t r = 0; r < count; r++) {
            size_t start = rd_u32le(restarts + 4 * (size_t)r);
            size_t stop = r + 1 < count ? rd_u32le(restarts + 4 * (size_t)(r + 1)) : end;
            if ((r == 0 && start != 0) || stop <= start || stop > end) return BAIL;
            size_t pos = base + start, limit = base + stop;
            for (int j = 0; pos < limit; j++) {
                uint64_t shared, non_shared, value_size;
                if (varint32(buf, &pos, limit, &shared) != OK ||
                    varint32(buf, &pos, limit, &non_shared) != OK ||
                    varint32(buf, &pos, limit, &value_size) != OK)
                    return BAIL;
                if (non_shared + value_size > limit - pos) return BAIL;
                if (j == 0 && shared) return BAIL; /* an entry at a restart shares a prefix */
                uint64_t key_size = shared + non_shared;
                int64_t prev_size = have_prev ? e->ksz[e->n - 1] + 8 : 0;
                if (j > 0 && shared > (uint64_t)prev_size) return BAIL;
                if (key_size < 8) return BAIL;
                int got = entries_reserve(e, (size_t)key_size);
                if (got != OK) return got;
                uint8_t *key = e->keys + e->keys_len;
                if (shared) memcpy(key, e->keys + e->koff[e->n - 1], (size_t)shared);
                memcpy(key + shared, buf + pos, (size_t)non_shared);
                uint8_t kind = key[key_size - 8];
                if (kind != 0 && kind != 1 && kind != 7) return BAIL;
                int repeat = 0;
                if (have_prev && (uint64_t)prev_size == key_size) {
                    if (j > 0)
                        repeat = shared >= key_size - 8;
                    else
                        repeat = memcmp(key, e->keys + e->koff[e->n - 1], (size_t)key_size - 8) == 0;
                }
                size_t i = e->n++;
                e->koff[i] = (int64_t)e->keys_len;
                e->ksz[i] = (int64_t)key_size - 8;
                e->voff[i] = (int64_t)(pos + non_shared);
                e->vsz[i] = (int64_t)value_size;
                e->kinds[i] = kind;
                e->repeats[i] = (uint8_t)repeat;
                e->keys_len += (size_t)key_size;
                have_prev = 1;
                pos += (size_t)(non_shared + value_size);
            }
        }
        base += size;
    }
    return OK;
}

static PyObject *kernel_sst_records(PyObject *module, PyObject *args) {
    PyObject *data_obj, *sizes_obj;
    if (!PyArg_ParseTuple(args, "OO:sst_records", &data_obj, &sizes_obj)) return NULL;
    Py_buffer data;
    Ints sizes;
    if (arrays_get(data_obj, &data, &sizes_obj, &sizes, 1, HANDLE_ARRAYS + 1, NULL) < 0)
        return NULL;
    PyObject *result = NULL;
    int64_t *block_sizes = malloc((size_t)(sizes.n ? sizes.n : 1) * sizeof *block_sizes);
    int64_t total = 0;
    if (block_sizes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < sizes.n; i++) {
        block_sizes[i] = ints_at(&sizes, i);
        if (block_sizes[i] < 0 || block_sizes[i] > data.len - total) {
            PyErr_SetString(PyExc_ValueError, "the blocks' sizes run past the buffer");
            goto done;
        }
        total += block_sizes[i];
    }
    Entries e;
    memset(&e, 0, sizeof e);
    int rc;
    const uint8_t *buf = data.buf;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_blocks(buf, block_sizes, sizes.n, &e);
    Py_END_ALLOW_THREADS
    if (rc != OK) {
        entries_free(&e);
        if (rc == NOMEM)
            PyErr_NoMemory();
        else {
            Py_INCREF(Py_None);
            result = Py_None;
        }
        goto done;
    }
    /* The keys, then the blocks: the values stay where they are, after the keys. */
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(e.keys_len + (size_t)data.len));
    if (out != NULL) {
        char *p = PyBytes_AS_STRING(out);
        if (e.keys_len) memcpy(p, e.keys, e.keys_len);
        memcpy(p + e.keys_len, buf, (size_t)data.len);
        for (size_t i = 0; i < e.n; i++) e.voff[i] += (int64_t)e.keys_len;
        free(e.keys);
        Py_ssize_t n = (Py_ssize_t)e.n;
        result = Py_BuildValue("(NNNNNNN)", out, column_of(e.koff, n, 8, 'q'),
                               column_of(e.ksz, n, 8, 'q'), column_of(e.voff, n, 8, 'q'),
                               column_of(e.vsz, n, 8, 'q'), column_of(e.kinds, n, 1, 'B'),
                               column_of(e.repeats, n, 1, 'B'));
    } else
        entries_free(&e);
done:
    free(block_sizes);
    arrays_release(&data, &sizes, 1);
    return result;
}

/* ---- a run of SST data blocks, from the file --------------------------------------------------
 * ``formats/sst.Table.read_blocks`` and ``block_records`` in one call without the GIL, for
 * the tables Spark 4 writes: each block's trailer checksum (XXH3, mixed with the compression
 * type as ``block_checksum`` does), then the block as it is or LZ4-decompressed (its size
 * first, a varint32), held to the inflation limits, then its entries. Another checksum or
 * compression type, or anything ``read_block`` would raise for, is handed back. */

#define XXH_INLINE_ALL
#include "vendor/xxhash.h"

#define SST_TRAILER 5
#define SST_XXH3 4
#define SST_NONE 0
#define SST_LZ4 4
#define SST_LZ4HC 5

static int sst_checksum_ok(const uint8_t *block, size_t size) {
    uint8_t type = block[size];
    uint32_t stored = rd_u32le(block + size + 1);
    uint32_t low = (uint32_t)XXH3_64bits(block, size);
    return (low ^ (uint32_t)((uint64_t)type * 0x6B9083D9u)) == stored;
}

/* The blocks' bytes checked and decompressed into ``blocks`` (pass 2 of ``kernel_sst_run``). */
static int sst_blocks(const uint8_t *file, const Ints *offsets, const Ints *sizes,
                      const int64_t *at, const int64_t *raw, uint8_t *blocks) {
    int64_t put = 0;
    for (Py_ssize_t i = 0; i < offsets->n; i++) {
        int64_t off = ints_at(offsets, i), size = ints_at(sizes, i);
        const uint8_t *block = file + off;
        if (!sst_checksum_ok(block, (size_t)size)) return BAIL;
        if (block[size] == SST_NONE)
            memcpy(blocks + put, block, (size_t)size);
        else if (lz4_block(block + at[i], (size_t)(size - at[i]), blocks + put, (size_t)raw[i]) != 0)
            return BAIL;
        put += raw[i];
    }
    return OK;
}

static PyObject *kernel_sst_run(PyObject *module, PyObject *args) {
    PyObject *data_obj, *offsets_obj, *sizes_obj;
    int checksum_type;
    long long most;
    if (!PyArg_ParseTuple(args, "OOOiL:sst_run", &data_obj, &offsets_obj, &sizes_obj,
                          &checksum_type, &most))
        return NULL;
    if (checksum_type != SST_XXH3) Py_RETURN_NONE;
    Py_buffer data;
    Ints handles[2];
    PyObject *objs[2] = {offsets_obj, sizes_obj};
    if (arrays_get(data_obj, &data, objs, handles, 2, HANDLE_ARRAYS,
                   "offsets and sizes differ in length") < 0)
        return NULL;
    const Ints *offsets = &handles[0], *sizes = &handles[1];
    PyObject *result = NULL, *out = NULL;
    Py_ssize_t n = offsets->n;
    int64_t *raw = malloc((size_t)(n ? n : 1) * sizeof *raw);
    int64_t *at = malloc((size_t)(n ? n : 1) * sizeof *at);
    Entries e;
    memset(&e, 0, sizeof e);
    if (raw == NULL || at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *file = data.buf;
    int64_t len = data.len, total = 0;
    int rc = OK;
    Py_BEGIN_ALLOW_THREADS
    /* Each block's place and decompressed size, as read_block checks them. */
    for (Py_ssize_t i = 0; i < n && rc == OK; i++) {
        int64_t off = ints_at(offsets, i), size = ints_at(sizes, i);
        if (off < 0 || size < 0 || size > len - SST_TRAILER || off > len - SST_TRAILER - size) {
            rc = BAIL;
            break;
        }
        uint8_t type = file[off + size];
        uint64_t declared = (uint64_t)size;
        size_t header = 0;
        if (type == SST_LZ4 || type == SST_LZ4HC) {
            if (varint32(file + off, &header, (size_t)size, &declared) != OK) rc = BAIL;
        } else if (type != SST_NONE) {
            rc = BAIL;
        }
        if (rc == OK && (int64_t)declared > most - total) rc = BAIL; /* the limits' error */
        at[i] = (int64_t)header;
        raw[i] = (int64_t)declared;
        if (rc == OK) total += (int64_t)declared;
    }
    Py_END_ALLOW_THREADS
    if (rc != OK) goto handed_back;
    /* One buffer, made once: room for the keys, then the blocks, decompressed in place; each
     * key is rebuilt into the room (as many bytes as the blocks'; past that, into memory of
     * its own, then copied). The values stay in their blocks. Room not written is never
     * read. Where the buffer cannot be had, the module reads the run (and fails as it does). */
    size_t room = (size_t)total + 64;
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(room + (size_t)total));
    if (out == NULL) {
        PyErr_Clear();
        rc = BAIL;
        goto handed_back;
    }
    uint8_t *buf = (uint8_t *)PyBytes_AS_STRING(out), *blocks = buf + room;
    e.keys = buf;
    e.keys_cap = room;
    e.keys_fixed = 1;
    e.first_cap = (size_t)total / 32 + 16; /* Spark's records: 40-100 bytes (no copies) */
    Py_BEGIN_ALLOW_THREADS
    rc = sst_blocks(file, offsets, sizes, at, raw, blocks);
    if (rc == OK) rc = decode_blocks(blocks, raw, n, &e);
    if (rc == ROOM) {
        entries_free(&e);
        e.first_cap = (size_t)total / 32 + 16;
        rc = decode_blocks(blocks, raw, n, &e);
    }
    Py_END_ALLOW_THREADS
    if (rc != OK) goto handed_back;
    if (!e.keys_fixed) {
        PyObject *whole = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(e.keys_len + (size_t)total));
        if (whole == NULL) goto done;
        memcpy(PyBytes_AS_STRING(whole), e.keys, e.keys_len);
        memcpy(PyBytes_AS_STRING(whole) + e.keys_len, blocks, (size_t)total);
        Py_SETREF(out, whole);
        room = e.keys_len;
    }
    for (size_t i = 0; i < e.n; i++) e.voff[i] += (int64_t)room;
    Py_ssize_t count = (Py_ssize_t)e.n;
    result = Py_BuildValue("(ONNNNNNL)", out, column_of(e.koff, count, 8, 'q'),
                           column_of(e.ksz, count, 8, 'q'), column_of(e.voff, count, 8, 'q'),
                           column_of(e.vsz, count, 8, 'q'), column_of(e.kinds, count, 1, 'B'),
                           column_of(e.repeats, count, 1, 'B'), (long long)total);
    /* the columns own their arrays now */
    e.koff = e.ksz = e.voff = e.vsz = NULL;
    e.kinds = e.repeats = NULL;
    goto done;
handed_back:
    if (rc == NOMEM)
        PyErr_NoMemory();
    else {
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    entries_free(&e);
    Py_XDECREF(out);
    free(raw);
    free(at);
    arrays_release(&data, handles, 2);
    return result;
}

/* ---- text ---------------------------------------------------------------------------------- */

/* Text being written: malloc'd, or (``bytes`` set and ``p`` in it) the bytes object that is
 * returned, written without the GIL (no other reference to it exists). Text that outgrows
 * ``bytes`` goes on in malloc'd memory and is copied into a new bytes object at the end:
 * resizing ``bytes`` mid-batch needs the GIL, and taking it back from another thread's work
 * cost replay on two threads 60% more CPU than on one (1M keys of JSON lines). */
#define DAY_CACHE 1024

typedef struct {
    char *p;
    size_t len, cap;
    PyObject *bytes;
    /* Dates written, and their text, by day (a batch's timestamps fall on few days, in any
     * order: a snapshot's rows come in hash order); a tag is the day - MIN_DAY + 1, 0 none. */
    uint32_t day_tag[DAY_CACHE];
    char day_text[DAY_CACHE][10];
} Out;

/* Whether the text has left ``bytes`` for malloc'd memory (or never was in it). */
static inline int out_spilled(const Out *o) {
    return o->bytes == NULL || o->p != PyBytes_AS_STRING(o->bytes);
}

static int out_grow(Out *o, size_t need) {
#ifdef KERNEL_TIGHT_BUFFERS
    /* the sanitizer build: text in malloc'd memory of exactly what was asked, so that a write
     * past what a NEED asked for is out of bounds */
    size_t cap = o->len + need;
#else
    size_t cap = o->cap ? o->cap : 256;
    while (cap - o->len < need) cap *= 2;
#endif
    if (!out_spilled(o)) {
        char *p = malloc(cap);
        if (p == NULL) return NOMEM;
        memcpy(p, o->p, o->len);
        o->p = p;
    } else {
        char *p = realloc(o->p, cap);
        if (p == NULL) return NOMEM;
        o->p = p;
    }
    o->cap = cap;
    return OK;
}

#define NEED(o, k)                                                                   \
    do {                                                                             \
        if ((o)->cap - (o)->len < (size_t)(k) && out_grow((o), (size_t)(k)) != OK)   \
            return NOMEM;                                                            \
    } while (0)

static inline void put_raw(Out *o, const char *s, size_t n) {
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static int put(Out *o, const char *s, size_t n) {
    if (n == 0) return OK; /* an empty string: ``p`` may not be there yet */
    NEED(o, n);
    put_raw(o, s, n);
    return OK;
}

#define PUT_LIT(o, s) put((o), (s), sizeof(s) - 1)

static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* The decimal digits of ``v`` at the end of ``end``; returns where they start. */
static inline char *utoa_back(uint64_t v, char *end) {
    while (v >= 100) {
        uint64_t q = v / 100;
        unsigned r = (unsigned)(v - q * 100);
        end -= 2;
        memcpy(end, DIGIT_PAIRS + 2 * r, 2);
        v = q;
    }
    if (v >= 10) {
        end -= 2;
        memcpy(end, DIGIT_PAIRS + 2 * v, 2);
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

static int put_int(Out *o, int64_t v) {
    char tmp[24], *end = tmp + sizeof tmp;
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *s = utoa_back(mag, end);
    if (v < 0) *--s = '-';
    return put(o, s, (size_t)(end - s));
}

/* ``v`` as exactly ``width`` digits (0 <= v < 10**width). */
static inline void put_fixed_raw(Out *o, uint64_t v, int width) {
    char *s = o->p + o->len;
    int i = width;
    while (i >= 2) {
        i -= 2;
        memcpy(s + i, DIGIT_PAIRS + 2 * (v % 100), 2);
        v /= 100;
    }
    if (i) s[0] = (char)('0' + v);
    o->len += (size_t)width;
}

/* -- floats: the three ways the reference path prints a double -- */

enum { FLOAT_REPR = 0, FLOAT_ORJSON = 1, FLOAT_ARROW = 2 };

/* Python's repr (the generated encoder of flat schemas), orjson (nested schemas) and Arrow's
 * cast to string (CSV cells) print the same shortest digits, in fixed notation for decimal
 * points ``decpt`` (value = 0.DIGITS * 10^decpt) in (lo, hi], else d.ddde+X, with their own
 * exponent signs and widths; repr and orjson give an integral value ".0", Arrow does not. */
static int put_double(Out *o, double x, int style) {
    uint64_t bits;
    memcpy(&bits, &x, 8);
    int sign = (int)(bits >> 63);
    uint64_t ieee_mantissa = bits & ((1ull << DOUBLE_MANTISSA_BITS) - 1);
    uint32_t ieee_exponent = (uint32_t)((bits >> DOUBLE_MANTISSA_BITS) & 0x7ff);
    if (ieee_exponent == 0x7ff) return BAIL; /* inf, nan: the reference path's */
    NEED(o, 40);
    if (sign) o->p[o->len++] = '-';
    if (ieee_exponent == 0 && ieee_mantissa == 0) {
        if (style == FLOAT_ARROW)
            o->p[o->len++] = '0';
        else
            put_raw(o, "0.0", 3);
        return OK;
    }
    floating_decimal_64 v;
    if (d2d_small_int(ieee_mantissa, ieee_exponent, &v)) {
        /* an integer below 2^53: its trailing zeros go to the exponent */
    } else {
        v = d2d(ieee_mantissa, ieee_exponent);
    }
    while (v.mantissa % 10 == 0) {
        v.mantissa /= 10;
        v.exponent++;
    }
    char tmp[24], *end = tmp + sizeof tmp;
    char *digits = utoa_back(v.mantissa, end);
    int nd = (int)(end - digits);
    int decpt = nd + v.exponent;
    int lo = style == FLOAT_REPR ? -4 : style == FLOAT_ORJSON ? -5 : -6;
    int hi = style == FLOAT_ARROW ? 10 : 16;
    if (decpt > lo && decpt <= hi) {
        if (decpt <= 0) {
            put_raw(o, "0.", 2);
            for (int i = 0; i < -decpt; i++) o->p[o->len++] = '0';
            put_raw(o, digits, (size_t)nd);
        } else if (decpt >= nd) {
            put_raw(o, digits, (size_t)nd);
            for (int i = 0; i < decpt - nd; i++) o->p[o->len++] = '0';
            if (style != FLOAT_ARROW) put_raw(o, ".0", 2);
        } else {
            put_raw(o, digits, (size_t)decpt);
            o->p[o->len++] = '.';
            put_raw(o, digits + decpt, (size_t)(nd - decpt));
        }
        return OK;
    }
    o->p[o->len++] = digits[0];
    if (nd > 1) {
        o->p[o->len++] = '.';
        put_raw(o, digits + 1, (size_t)(nd - 1));
    }
    int e = decpt - 1;
    o->p[o->len++] = 'e';
    o->p[o->len++] = e < 0 ? '-' : '+';
    unsigned mag = (unsigned)(e < 0 ? -e : e);
    if (style == FLOAT_REPR && mag < 10) o->p[o->len++] = '0';
    char etmp[8], *eend = etmp + sizeof etmp;
    char *es = utoa_back(mag, eend);
    put_raw(o, es, (size_t)(eend - es));
    return OK;
}

/* -- dates and times: as plain_arrow formats them (years 1-9999, else the reference) -- */

#define MIN_DAY (-719162)
#define MAX_DAY 2932896
#define DAY_US 86400000000LL

static inline int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* "YYYY-MM-DD" (10 bytes, room made by the caller); days within MIN_DAY..MAX_DAY. */
static inline void put_date_raw(Out *o, int64_t days) {
    uint32_t tag = (uint32_t)(days - MIN_DAY + 1), slot = tag % DAY_CACHE;
    if (o->day_tag[slot] == tag) {
        put_raw(o, o->day_text[slot], 10);
        return;
    }
    /* Howard Hinnant's civil_from_days */
    int64_t z = days + 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t day = doy - (153 * mp + 2) / 5 + 1;
    int64_t month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = yoe + era * 400 + (month <= 2);
    size_t at = o->len;
    put_fixed_raw(o, (uint64_t)year, 4);
    o->p[o->len++] = '-';
    put_fixed_raw(o, (uint64_t)month, 2);
    o->p[o->len++] = '-';
    put_fixed_raw(o, (uint64_t)day, 2);
    memcpy(o->day_text[slot], o->p + at, 10);
    o->day_tag[slot] = tag;
}

static int put_date(Out *o, int64_t days, int quote) {
    if (days < MIN_DAY || days > MAX_DAY) return BAIL;
    NEED(o, 12);
    if (quote) o->p[o->len++] = '"';
    put_date_raw(o, days);
    if (quote) o->p[o->len++] = '"';
    return OK;
}

static int put_timestamp(Out *o, int64_t us, int utc, int quote) {
    int64_t days = floor_div(us, DAY_US);
    if (days < MIN_DAY || days > MAX_DAY) return BAIL;
    int64_t rest = us - days * DAY_US, secs = rest / 1000000, frac = rest % 1000000;
    NEED(o, 30);
    if (quote) o->p[o->len++] = '"';
    put_date_raw(o, days);
    o->p[o->len++] = 'T';
    put_fixed_raw(o, (uint64_t)(secs / 3600), 2);
    o->p[o->len++] = ':';
    put_fixed_raw(o, (uint64_t)(secs / 60 % 60), 2);
    o->p[o->len++] = ':';
    put_fixed_raw(o, (uint64_t)(secs % 60), 2);
    o->p[o->len++] = '.';
    put_fixed_raw(o, (uint64_t)frac, 6);
    if (utc) o->p[o->len++] = 'Z';
    if (quote) o->p[o->len++] = '"';
    return OK;
}

/* str(datetime.timedelta(microseconds=us)), quoted or not. */
static int put_timedelta(Out *o, int64_t us, int quote) {
    int64_t days = floor_div(us, DAY_US), rest = us % DAY_US; /* days * DAY_US may overflow */
    if (rest < 0) rest += DAY_US;
    int64_t secs = rest / 1000000, frac = rest % 1000000;
    NEED(o, 2);
    if (quote) o->p[o->len++] = '"';
    if (days) {
        if (put_int(o, days) != OK) return NOMEM;
        if (days == 1 || days == -1 ? PUT_LIT(o, " day, ") : PUT_LIT(o, " days, ")) return NOMEM;
    }
    if (put_int(o, secs / 3600) != OK) return NOMEM;
    NEED(o, 16);
    o->p[o->len++] = ':';
    put_fixed_raw(o, (uint64_t)(secs / 60 % 60), 2);
    o->p[o->len++] = ':';
    put_fixed_raw(o, (uint64_t)(secs % 60), 2);
    if (frac) {
        o->p[o->len++] = '.';
        put_fixed_raw(o, (uint64_t)frac, 6);
    }
    if (quote) o->p[o->len++] = '"';
    return OK;
}

/* str(Decimal) of ``unscaled`` * 10^-scale (Python's to-scientific-string), quoted or not. */
static int put_decimal(Out *o, int64_t unscaled, int scale, int quote) {
    char tmp[24], *end = tmp + sizeof tmp;
    uint64_t mag = unscaled < 0 ? (uint64_t)0 - (uint64_t)unscaled : (uint64_t)unscaled;
    char *digits = utoa_back(mag, end);
    int64_t nd = end - digits, exp = -(int64_t)scale, left = exp + nd, dot;
    dot = (exp <= 0 && left > -6) ? left : 1;
    NEED(o, 64 + (size_t)(dot < 0 ? -dot : dot));
    if (quote) o->p[o->len++] = '"';
    if (unscaled < 0) o->p[o->len++] = '-';
    if (dot <= 0) {
        put_raw(o, "0.", 2);
        for (int64_t i = 0; i < -dot; i++) o->p[o->len++] = '0';
        put_raw(o, digits, (size_t)nd);
    } else if (dot >= nd) {
        put_raw(o, digits, (size_t)nd);
        for (int64_t i = 0; i < dot - nd; i++) o->p[o->len++] = '0';
    } else {
        put_raw(o, digits, (size_t)dot);
        o->p[o->len++] = '.';
        put_raw(o, digits + dot, (size_t)(nd - dot));
    }
    if (left != dot) {
        int64_t e = left - dot;
        o->p[o->len++] = 'E';
        o->p[o->len++] = e < 0 ? '-' : '+';
        char etmp[24], *eend = etmp + sizeof etmp;
        char *es = utoa_back((uint64_t)(e < 0 ? -e : e), eend);
        put_raw(o, es, (size_t)(eend - es));
    }
    if (quote) o->p[o->len++] = '"';
    return OK;
}

static int put_hex(Out *o, const uint8_t *s, size_t n, int quote) {
    static const char HEX[] = "0123456789abcdef";
    NEED(o, 2 * n + 2);
    if (quote) o->p[o->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        o->p[o->len++] = HEX[s[i] >> 4];
        o->p[o->len++] = HEX[s[i] & 15];
    }
    if (quote) o->p[o->len++] = '"';
    return OK;
}

/* Bytes of the UTF-8 character at ``s`` (0: not valid UTF-8, as Python and Arrow judge it). */
static inline int utf8_char(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c >= 0xc2 && c <= 0xdf) return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) return 0;
        if (c == 0xe0 && s[1] < 0xa0) return 0; /* overlong */
        if (c == 0xed && s[1] > 0x9f) return 0; /* a surrogate */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        if (c == 0xf0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xf4 && s[1] > 0x8f) return 0; /* past U+10FFFF */
        return 4;
    }
    return 0;
}

/* A string as JSON (json.encoder.encode_basestring: control characters, quote and backslash
 * escaped, the rest as it is); BAIL on invalid UTF-8 (the reference path replaces it). */
static int put_json_string(Out *o, const uint8_t *s, size_t n) {
    static const char HEX[] = "0123456789abcdef";
    NEED(o, n + 2);
    o->p[o->len++] = '"';
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] >= 0x20 && s[j] < 0x80 && s[j] != '"' && s[j] != '\\') j++;
        if (j > i) {
            NEED(o, j - i);
            put_raw(o, (const char *)s + i, j - i);
            i = j;
            if (i == n) break;
        }
        uint8_t c = s[i];
        if (c >= 0x80) {
            int len = utf8_char(s + i, n - i);
            if (len == 0) return BAIL;
            NEED(o, 4);
            put_raw(o, (const char *)s + i, (size_t)len);
            i += (size_t)len;
            continue;
        }
        NEED(o, 6);
        o->p[o->len++] = '\\';
        switch (c) {
        case '"': o->p[o->len++] = '"'; break;
        case '\\': o->p[o->len++] = '\\'; break;
        case '\n': o->p[o->len++] = 'n'; break;
        case '\r': o->p[o->len++] = 'r'; break;
        case '\t': o->p[o->len++] = 't'; break;
        case '\b': o->p[o->len++] = 'b'; break;
        case '\f': o->p[o->len++] = 'f'; break;
        default:
            put_raw(o, "u00", 3);
            o->p[o->len++] = HEX[c >> 4];
            o->p[o->len++] = HEX[c & 15];
        }
        i++;
    }
    NEED(o, 1);
    o->p[o->len++] = '"';
    return OK;
}

/* A CSV cell of text as Arrow's writer quotes it: always in quotes, quotes doubled;
 * ``check`` validates UTF-8 (BAIL when invalid). */
static int put_csv_text(Out *o, const uint8_t *s, size_t n, int check) {
    NEED(o, n + 2);
    o->p[o->len++] = '"';
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] != '"' && s[j] < 0x80) j++;
        if (j > i) {
            NEED(o, j - i);
            put_raw(o, (const char *)s + i, j - i);
            i = j;
            if (i == n) break;
        }
        if (s[i] == '"') {
            NEED(o, 2);
            put_raw(o, "\"\"", 2);
            i++;
            continue;
        }
        int len = check ? utf8_char(s + i, n - i) : 1;
        if (len == 0) return BAIL;
        NEED(o, 4);
        put_raw(o, (const char *)s + i, (size_t)len);
        i += (size_t)len;
    }
    NEED(o, 1);
    o->p[o->len++] = '"';
    return OK;
}

/* ---- the schema as a program ------------------------------------------------------------- */

enum {
    K_VOID, K_BOOLEAN, K_BYTE, K_SHORT, K_INTEGER, K_LONG, K_FLOAT, K_DOUBLE, K_DATE,
    K_TIMESTAMP, K_TIMESTAMP_NTZ, K_STRING, K_BINARY, K_DECIMAL, K_YEAR_MONTH, K_DAY_TIME,
    K_STRUCT, K_ARRAY, K_KINDS
};

typedef struct Node {
    int kind;
    int scale;  /* decimals */
    int width;  /* bytes of one element of an array of this type */
    int leaves; /* CSV cells */
    Py_ssize_t n;
    struct Node **kids;
    char **labels; /* '{"name":' then ',"name":' */
    size_t *label_lens;
    struct Node *element;
} Node;

static void node_free(Node *t) {
    if (t == NULL) return;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        if (t->kids) node_free(t->kids[i]);
        if (t->labels) free(t->labels[i]);
    }
    free(t->kids);
    free(t->labels);
    free(t->label_lens);
    node_free(t->element);
    free(t);
}

static int element_width(int kind) {
    switch (kind) {
    case K_BOOLEAN: case K_BYTE: return 1;
    case K_SHORT: return 2;
    case K_INTEGER: case K_FLOAT: case K_DATE: case K_YEAR_MONTH: return 4;
    default: return 8;
    }
}

/* (kind,) | (K_DECIMAL, scale) | (K_STRUCT, ((json_name_bytes, node), ...)) | (K_ARRAY, node) */
static Node *node_compile(PyObject *spec, int depth) {
    if (depth > 64) {
        PyErr_SetString(PyExc_ValueError, "the schema is nested too deep");
        return NULL;
    }
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 1) {
        PyErr_SetString(PyExc_TypeError, "a schema node is a tuple (kind, ...)");
        return NULL;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    if (kind == -1 && PyErr_Occurred()) return NULL;
    if (kind < 0 || kind >= K_KINDS) {
        PyErr_Format(PyExc_ValueError, "unknown kind %ld", kind);
        return NULL;
    }
    Node *t = calloc(1, sizeof *t);
    if (t == NULL) return (Node *)PyErr_NoMemory();
    t->kind = (int)kind;
    t->width = element_width(t->kind);
    t->leaves = 1;
    Py_ssize_t size = PyTuple_GET_SIZE(spec);
    if (kind == K_DECIMAL || kind == K_STRUCT || kind == K_ARRAY) {
        if (size != 2) {
            PyErr_SetString(PyExc_ValueError, "this kind takes one argument");
            goto fail;
        }
    }
    if (kind == K_DECIMAL) {
        long scale = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
        if (scale == -1 && PyErr_Occurred()) goto fail;
        if (scale < -1000 || scale > 1000) {
            PyErr_SetString(PyExc_ValueError, "decimal scale out of range");
            goto fail;
        }
        t->scale = (int)scale;
    } else if (kind == K_ARRAY) {
        t->element = node_compile(PyTuple_GET_ITEM(spec, 1), depth + 1);
        if (t->element == NULL) goto fail;
    } else if (kind == K_STRUCT) {
        PyObject *fields = PySequence_Fast(PyTuple_GET_ITEM(spec, 1), "struct fields");
        if (fields == NULL) goto fail;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(fields);
        t->kids = calloc((size_t)(n ? n : 1), sizeof *t->kids);
        t->labels = calloc((size_t)(n ? n : 1), sizeof *t->labels);
        t->label_lens = calloc((size_t)(n ? n : 1), sizeof *t->label_lens);
        if (!t->kids || !t->labels || !t->label_lens) {
            Py_DECREF(fields);
            PyErr_NoMemory();
            goto fail;
        }
        t->n = n;
        t->leaves = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(fields, i);
            const char *name;
            Py_ssize_t name_len;
            PyObject *kid;
            if (!PyArg_ParseTuple(item, "y#O;a field is (json_name, node)", &name, &name_len,
                                  &kid)) {
                Py_DECREF(fields);
                goto fail;
            }
            t->labels[i] = malloc((size_t)name_len + 2);
            if (t->labels[i] == NULL) {
                Py_DECREF(fields);
                PyErr_NoMemory();
                goto fail;
            }
            t->labels[i][0] = i == 0 ? '{' : ',';
            memcpy(t->labels[i] + 1, name, (size_t)name_len);
            t->labels[i][name_len + 1] = ':';
            t->label_lens[i] = (size_t)name_len + 2;
            t->kids[i] = node_compile(kid, depth + 1);
            if (t->kids[i] == NULL) {
                Py_DECREF(fields);
                goto fail;
            }
            t->leaves += t->kids[i]->leaves;
        }
        Py_DECREF(fields);
    } else if (size != 1) {
        PyErr_SetString(PyExc_ValueError, "this kind takes no argument");
        goto fail;
    }
    return t;
fail:
    node_free(t);
    return NULL;
}

/* ---- rows to text -------------------------------------------------------------------------
 * ``base``/``size``: the container a value's (offset, size) word is relative to and must fit
 * in (a row, or an array); ``slot``: where the value (or that word) is. */

typedef struct {
    int floats; /* FLOAT_REPR or FLOAT_ORJSON for JSON text */
    Out scratch; /* a CSV cell's JSON text before it is quoted */
} Style;

static int json_value(Out *o, const Node *t, const uint8_t *base, uint64_t size,
                      const uint8_t *slot, const Style *st);

static int json_struct(Out *o, const Node *t, const uint8_t *row, uint64_t size,
                       const Style *st) {
    uint64_t nf = (uint64_t)t->n, words = (nf + 63) / 64;
    if (size < 8 * (words + nf)) return BAIL;
    if (nf == 0) return PUT_LIT(o, "{}");
    for (uint64_t i = 0; i < nf; i++) {
        const Node *kid = t->kids[i];
        if (put(o, t->labels[i], t->label_lens[i]) != OK) return NOMEM;
        int rc;
        if (kid->kind == K_VOID || (rd64(row + 8 * (i / 64)) >> (i % 64)) & 1)
            rc = PUT_LIT(o, "null");
        else
            rc = json_value(o, kid, row, size, row + 8 * (words + i), st);
        if (rc != OK) return rc;
    }
    return PUT_LIT(o, "}");
}

static int json_array(Out *o, const Node *t, const uint8_t *arr, uint64_t size,
                      const Style *st) {
    if (size < 8) return BAIL;
    int64_t count = rdi64(arr);
    if (count < 0 || (uint64_t)count > size) return BAIL;
    uint64_t header = 8 + (((uint64_t)count + 63) / 64) * 8;
    const Node *e = t->element;
    if (header + (uint64_t)count * (uint64_t)e->width > size) return BAIL;
    if (PUT_LIT(o, "[") != OK) return NOMEM;
    for (int64_t k = 0; k < count; k++) {
        if (k && PUT_LIT(o, ",") != OK) return NOMEM;
        int rc;
        if (e->kind == K_VOID || (arr[8 + (k >> 3)] >> (k & 7)) & 1)
            rc = PUT_LIT(o, "null");
        else
            rc = json_value(o, e, arr, size, arr + header + (uint64_t)k * (uint64_t)e->width, st);
        if (rc != OK) return rc;
    }
    return PUT_LIT(o, "]");
}

/* The (offset, size) word at ``slot``: the bytes it points to inside the container. */
static inline int span(const uint8_t *base, uint64_t size, const uint8_t *slot,
                       const uint8_t **at, uint64_t *len) {
    uint64_t word = rd64(slot), off = word >> 32;
    *len = word & 0xffffffffu;
    if (off + *len > size) return BAIL;
    *at = base + off;
    return OK;
}

static int json_value(Out *o, const Node *t, const uint8_t *base, uint64_t size,
                      const uint8_t *slot, const Style *st) {
    const uint8_t *at;
    uint64_t len;
    switch (t->kind) {
    case K_VOID: return PUT_LIT(o, "null");
    case K_BOOLEAN: return slot[0] ? PUT_LIT(o, "true") : PUT_LIT(o, "false");
    case K_BYTE: return put_int(o, (int8_t)slot[0]);
    case K_SHORT: return put_int(o, rdi16(slot));
    case K_INTEGER: case K_YEAR_MONTH: return put_int(o, rdi32(slot));
    case K_LONG: return put_int(o, rdi64(slot));
    case K_FLOAT: return put_double(o, (double)rdf32(slot), st->floats);
    case K_DOUBLE: return put_double(o, rdf64(slot), st->floats);
    case K_DATE: return put_date(o, rdi32(slot), 1);
    case K_TIMESTAMP: return put_timestamp(o, rdi64(slot), 1, 1);
    case K_TIMESTAMP_NTZ: return put_timestamp(o, rdi64(slot), 0, 1);
    case K_DECIMAL: return put_decimal(o, rdi64(slot), t->scale, 1);
    case K_DAY_TIME: return put_timedelta(o, rdi64(slot), 1);
    default: break;
    }
    if (span(base, size, slot, &at, &len) != OK) return BAIL;
    switch (t->kind) {
    case K_STRING: return put_json_string(o, at, len);
    case K_BINARY: return put_hex(o, at, len, 1);
    case K_STRUCT: return json_struct(o, t, at, len, st);
    default: return json_array(o, t, at, len, st);
    }
}

/* A value as its CSV cell (not a struct: those are their fields' cells). */
static int csv_cell(Out *o, const Node *t, const uint8_t *base, uint64_t size,
                    const uint8_t *slot, Style *st) {
    const uint8_t *at;
    uint64_t len;
    switch (t->kind) {
    case K_FLOAT: return put_double(o, (double)rdf32(slot), FLOAT_ARROW);
    case K_DOUBLE: return put_double(o, rdf64(slot), FLOAT_ARROW);
    case K_STRING:
        if (span(base, size, slot, &at, &len) != OK) return BAIL;
        return put_csv_text(o, at, len, 1);
    case K_ARRAY: {
        if (span(base, size, slot, &at, &len) != OK) return BAIL;
        st->scratch.len = 0;
        int rc = json_array(&st->scratch, t, at, len, st);
        if (rc != OK) return rc;
        return put_csv_text(o, (const uint8_t *)st->scratch.p, st->scratch.len, 0);
    }
    default:
        /* booleans, integers, dates, timestamps, decimals, intervals and hex: their JSON
         * text is their cell (quoted text has no quote inside) */
        return json_value(o, t, base, size, slot, st);
    }
}

static int csv_empty(Out *o, int cells) {
    NEED(o, (size_t)cells);
    memset(o->p + o->len, ',', (size_t)cells);
    o->len += (size_t)cells;
    return OK;
}

/* The cells of a struct's leaf columns, each after a comma (a null struct's are empty). */
static int csv_struct(Out *o, const Node *t, const uint8_t *row, uint64_t size, Style *st) {
    uint64_t nf = (uint64_t)t->n, words = (nf + 63) / 64;
    if (size < 8 * (words + nf)) return BAIL;
    for (uint64_t i = 0; i < nf; i++) {
        const Node *kid = t->kids[i];
        const uint8_t *slot = row + 8 * (words + i);
        int null = kid->kind == K_VOID || (rd64(row + 8 * (i / 64)) >> (i % 64)) & 1;
        int rc;
        if (kid->kind == K_STRUCT) {
            const uint8_t *at;
            uint64_t len;
            if (null)
                rc = csv_empty(o, kid->leaves);
            else if (span(row, size, slot, &at, &len) != OK)
                rc = BAIL;
            else
                rc = csv_struct(o, kid, at, len, st);
        } else {
            rc = PUT_LIT(o, ",");
            if (rc == OK && !null) rc = csv_cell(o, kid, row, size, slot, st);
        }
        if (rc != OK) return rc;
    }
    return OK;
}

/* ---- Format ------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    Node *key, *value;
    int rocks;       /* RocksDB rows: [0x00][UnsafeRow] */
    int repr_floats; /* JSON floats as repr (flat schemas) or as orjson (nested ones) */
    size_t row_bytes; /* the text of a row in the last batch, rounded up: the next batch's
                       * room, so that text seldom outgrows it (set with the GIL held) */
} Format;

static void format_dealloc(Format *self) {
    node_free(self->key);
    node_free(self->value);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *format_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"key", "value", "rocks", "repr_floats", NULL};
    PyObject *key, *value;
    int rocks, repr_floats;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOpp:Format", names, &key, &value, &rocks,
                                     &repr_floats))
        return NULL;
    Format *self = (Format *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->rocks = rocks;
    self->repr_floats = repr_floats;
    self->key = node_compile(key, 0);
    self->value = self->key ? node_compile(value, 0) : NULL;
    if (self->value == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    if (self->key->kind != K_STRUCT || self->value->kind != K_STRUCT) {
        PyErr_SetString(PyExc_ValueError, "keys and values are structs");
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* A record's row: ``[off, off + size)`` inside the buffer, after RocksDB's version byte or
 * with an HDFS value's size rounded down to 8 bytes (Spark < 2.3's 4 junk bytes). */
static inline int row_of(const uint8_t *buf, int64_t len, int64_t off, int64_t size, int rocks,
                         int value, const uint8_t **row, uint64_t *row_size) {
    if (rocks) {
        if (size < 1 || off < 0 || off >= len || buf[off] != 0) return BAIL;
        off += 1;
        size -= 1;
    } else if (value) {
        size &= ~(int64_t)7;
    }
    if (off < 0 || size < 0 || off > len - size) return BAIL;
    *row = buf + off;
    *row_size = (uint64_t)size;
    return OK;
}

static PyObject *format_rows(Format *self, PyObject *args, int csv) {
    long long partition;
    PyObject *data_obj, *ko_obj, *ks_obj, *vo_obj, *vs_obj;
    if (!PyArg_ParseTuple(args, "LOOOOO", &partition, &data_obj, &ko_obj, &ks_obj, &vo_obj,
                          &vs_obj))
        return NULL;
    Py_buffer data;
    Ints a[4];
    PyObject *objs[4] = {ko_obj, ks_obj, vo_obj, vs_obj};
    if (arrays_get(data_obj, &data, objs, a, 4, RECORD_ARRAYS,
                   "the record arrays differ in length") < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = a[0].n;
    Out out = {NULL, 0, 0, NULL, {0}, {{0}}};
    Style st = {self->repr_floats ? FLOAT_REPR : FLOAT_ORJSON, {NULL, 0, 0, NULL, {0}, {{0}}}};
    int rc = OK;
    char head[48];
    int head_len = csv ? snprintf(head, sizeof head, "%lld", partition)
                       : snprintf(head, sizeof head, "{\"partition_id\":%lld,\"key\":", partition);
    const uint8_t *buf = data.buf;
#ifndef KERNEL_TIGHT_BUFFERS
    out.cap = (size_t)n * (self->row_bytes ? self->row_bytes + self->row_bytes / 8 : 64) + 256;
    out.bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)out.cap);
    if (out.bytes == NULL) {
        arrays_release(&data, a, 4);
        return NULL;
    }
    out.p = PyBytes_AS_STRING(out.bytes);
#endif
    PyThreadState *released = PyEval_SaveThread();
    for (Py_ssize_t i = 0; i < n && rc == OK; i++) {
        const uint8_t *key, *value;
        uint64_t key_size, value_size;
        if (row_of(buf, data.len, ints_at(&a[0], i), ints_at(&a[1], i), self->rocks, 0, &key,
                   &key_size) != OK ||
            row_of(buf, data.len, ints_at(&a[2], i), ints_at(&a[3], i), self->rocks, 1, &value,
                   &value_size) != OK) {
            rc = BAIL;
            break;
        }
        if ((rc = put(&out, head, (size_t)head_len)) != OK) break;
        if (csv) {
            if ((rc = csv_struct(&out, self->key, key, key_size, &st)) != OK) break;
            if ((rc = csv_struct(&out, self->value, value, value_size, &st)) != OK) break;
            rc = PUT_LIT(&out, "\n");
        } else {
            if ((rc = json_struct(&out, self->key, key, key_size, &st)) != OK) break;
            if ((rc = PUT_LIT(&out, ",\"value\":")) != OK) break;
            if ((rc = json_struct(&out, self->value, value, value_size, &st)) != OK) break;
            rc = PUT_LIT(&out, "}\n");
        }
    }
    PyEval_RestoreThread(released);
    free(st.scratch.p);
    if (out_spilled(&out)) {
        PyObject *spilled = NULL;
        if (rc == OK) {
            spilled = PyBytes_FromStringAndSize(out.p ? out.p : "", (Py_ssize_t)out.len);
            if (spilled == NULL) rc = NOMEM;
        }
        free(out.p);
        Py_XDECREF(out.bytes);
        out.bytes = spilled;
    }
    if (rc == OK && n > 0) self->row_bytes = out.len / (size_t)n + 1;
    if (rc == OK && _PyBytes_Resize(&out.bytes, (Py_ssize_t)out.len) == 0) {
        result = out.bytes; /* _PyBytes_Resize set out.bytes to NULL when it failed */
        out.bytes = NULL;
    } else if (rc == NOMEM)
        PyErr_NoMemory();
    else if (rc == BAIL) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    Py_XDECREF(out.bytes);
    arrays_release(&data, a, 4);
    return result;
}

/* ---- rows to Arrow columns ------------------------------------------------------------------
 * The plain values ``state/plain_arrow.plain`` makes (every integer an int64, floats float64,
 * dates, timestamps, decimals, intervals and binary as their text), as the buffers of Arrow
 * arrays: ``Format.columns`` gives one (null count, validity, offsets, data) per node, in
 * preorder, which ``core/kernel`` hands to ``pyarrow.Array.from_buffers``. A null struct's
 * fields are null too. Arrays are left to the reference path. */

typedef struct Col {
    const Node *t;
    uint8_t *valid;   /* a bit per row, set where the value is there */
    int64_t nulls;
    uint8_t *fixed;   /* int64 or float64 per row, or a bit per row (booleans) */
    int32_t *offsets; /* text: n + 1 */
    Out text;
    struct Col *kids;
} Col;

static int text_kind(int kind) {
    switch (kind) {
    case K_STRING: case K_BINARY: case K_DATE: case K_TIMESTAMP: case K_TIMESTAMP_NTZ:
    case K_DECIMAL: case K_DAY_TIME: return 1;
    default: return 0;
    }
}

/* Whether values of ``t`` have columns here (no arrays anywhere in it). */
static int node_columnar(const Node *t) {
    if (t->kind == K_ARRAY) return 0;
    for (Py_ssize_t i = 0; i < t->n; i++)
        if (!node_columnar(t->kids[i])) return 0;
    return 1;
}

static void col_free(Col *c) {
    if (c == NULL) return;
    if (c->kids)
        for (Py_ssize_t i = 0; i < c->t->n; i++) col_free(&c->kids[i]);
    free(c->kids);
    free(c->valid);
    free(c->fixed);
    free(c->offsets);
    free(c->text.p);
    memset(c, 0, sizeof *c);
}

static int col_init(Col *c, const Node *t, Py_ssize_t n) {
    size_t bits = ((size_t)n + 7) / 8 + 1;
    c->t = t;
    c->valid = calloc(bits, 1);
    if (c->valid == NULL) return NOMEM;
    if (t->kind == K_STRUCT) {
        c->kids = calloc((size_t)(t->n ? t->n : 1), sizeof *c->kids);
        if (c->kids == NULL) return NOMEM;
        for (Py_ssize_t i = 0; i < t->n; i++)
            if (col_init(&c->kids[i], t->kids[i], n) != OK) return NOMEM;
    } else if (text_kind(t->kind)) {
        c->offsets = calloc((size_t)n + 1, sizeof *c->offsets);
        if (c->offsets == NULL) return NOMEM;
    } else if (t->kind == K_BOOLEAN) {
        c->fixed = calloc(bits, 1);
        if (c->fixed == NULL) return NOMEM;
    } else if (t->kind != K_VOID) {
        c->fixed = calloc((size_t)n ? (size_t)n : 1, 8);
        if (c->fixed == NULL) return NOMEM;
    }
    return OK;
}

static void col_null(Col *c, Py_ssize_t i) {
    c->nulls++;
    if (c->offsets) c->offsets[i + 1] = c->offsets[i];
    if (c->kids)
        for (Py_ssize_t k = 0; k < c->t->n; k++) col_null(&c->kids[k], i);
}

/* A string's bytes as they are, after checking they are UTF-8 (BAIL where not: the
 * reference path replaces them). */
static int put_utf8(Out *o, const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8 && (rd64(s + i) & 0x8080808080808080ull) == 0) {
            i += 8; /* eight ASCII bytes */
            continue;
        }
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int len = utf8_char(s + i, n - i);
        if (len == 0) return BAIL;
        i += (size_t)len;
    }
    return put(o, (const char *)s, n);
}

static int col_struct(Col *c, Py_ssize_t i, const uint8_t *row, uint64_t size);

/* The value at ``slot`` (inside the container ``base``/``size``) as row ``i`` of ``c``. */
static int col_value(Col *c, Py_ssize_t i, const uint8_t *base, uint64_t size,
                     const uint8_t *slot) {
    const Node *t = c->t;
    const uint8_t *at;
    uint64_t len;
    int rc = OK;
    int64_t *ints = (int64_t *)c->fixed;
    double *doubles = (double *)c->fixed;
    switch (t->kind) {
    case K_VOID: col_null(c, i); return OK;
    case K_BOOLEAN:
        if (slot[0]) c->fixed[i >> 3] |= (uint8_t)(1u << (i & 7));
        break;
    case K_BYTE: ints[i] = (int8_t)slot[0]; break;
    case K_SHORT: ints[i] = rdi16(slot); break;
    case K_INTEGER: case K_YEAR_MONTH: ints[i] = rdi32(slot); break;
    case K_LONG: ints[i] = rdi64(slot); break;
    case K_FLOAT: doubles[i] = (double)rdf32(slot); break;
    case K_DOUBLE: doubles[i] = rdf64(slot); break;
    case K_DATE: rc = put_date(&c->text, rdi32(slot), 0); break;
    case K_TIMESTAMP: rc = put_timestamp(&c->text, rdi64(slot), 1, 0); break;
    case K_TIMESTAMP_NTZ: rc = put_timestamp(&c->text, rdi64(slot), 0, 0); break;
    case K_DECIMAL: rc = put_decimal(&c->text, rdi64(slot), t->scale, 0); break;
    case K_DAY_TIME: rc = put_timedelta(&c->text, rdi64(slot), 0); break;
    case K_STRING: case K_BINARY: case K_STRUCT:
        if (span(base, size, slot, &at, &len) != OK) return BAIL;
        if (t->kind == K_STRUCT) return col_struct(c, i, at, len);
        rc = t->kind == K_STRING ? put_utf8(&c->text, at, len) : put_hex(&c->text, at, len, 0);
        break;
    default: return BAIL;
    }
    if (rc != OK) return rc;
    if (c->offsets) {
        if (c->text.len > INT32_MAX) return BAIL; /* past one Arrow string array */
        c->offsets[i + 1] = (int32_t)c->text.len;
    }
    c->valid[i >> 3] |= (uint8_t)(1u << (i & 7));
    return OK;
}

static int col_struct(Col *c, Py_ssize_t i, const uint8_t *row, uint64_t size) {
    const Node *t = c->t;
    uint64_t nf = (uint64_t)t->n, words = (nf + 63) / 64;
    if (size < 8 * (words + nf)) return BAIL;
    for (uint64_t k = 0; k < nf; k++) {
        Col *kid = &c->kids[k];
        int rc = OK;
        if (kid->t->kind == K_VOID || (rd64(row + 8 * (k / 64)) >> (k % 64)) & 1)
            col_null(kid, i);
        else
            rc = col_value(kid, i, row, size, row + 8 * (words + k));
        if (rc != OK) return rc;
    }
    c->valid[i >> 3] |= (uint8_t)(1u << (i & 7));
    return OK;
}

/* ``c``'s buffers, and its fields', appended to ``list`` as (nulls, validity, offsets,
 * data) tuples; the memory goes to the Columns made (and is taken out of ``c``). */
static int col_emit(Col *c, Py_ssize_t n, PyObject *list) {
    Py_ssize_t bits = (n + 7) / 8;
    PyObject *valid = NULL, *offsets = NULL, *data = NULL, *item = NULL;
    valid = column_of(c->valid, bits, 1, 'B');
    c->valid = NULL;
    if (valid == NULL) goto fail;
    if (c->offsets) {
        offsets = column_of(c->offsets, n + 1, 4, 'i');
        c->offsets = NULL;
        if (offsets == NULL) goto fail;
        data = column_of(c->text.p, (Py_ssize_t)c->text.len, 1, 'B');
        c->text.p = NULL;
        if (data == NULL) goto fail;
    } else if (c->fixed) {
        Py_ssize_t nbytes = c->t->kind == K_BOOLEAN ? bits : 8 * n;
        data = column_of(c->fixed, nbytes, 1, 'B');
        c->fixed = NULL;
        if (data == NULL) goto fail;
    }
    item = Py_BuildValue("(LOOO)", (long long)c->nulls, valid, offsets ? offsets : Py_None,
                         data ? data : Py_None);
    if (item == NULL || PyList_Append(list, item) < 0) goto fail;
    Py_DECREF(item);
    Py_DECREF(valid);
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    if (c->kids)
        for (Py_ssize_t k = 0; k < c->t->n; k++)
            if (col_emit(&c->kids[k], n, list) < 0) return -1;
    return 0;
fail:
    Py_XDECREF(item);
    Py_XDECREF(valid);
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    return -1;
}

static PyObject *format_columns(Format *self, PyObject *args) {
    PyObject *data_obj, *ko_obj, *ks_obj, *vo_obj, *vs_obj;
    if (!PyArg_ParseTuple(args, "OOOOO", &data_obj, &ko_obj, &ks_obj, &vo_obj, &vs_obj))
        return NULL;
    if (!node_columnar(self->key) || !node_columnar(self->value)) Py_RETURN_NONE;
    Py_buffer data;
    Ints a[4];
    PyObject *objs[4] = {ko_obj, ks_obj, vo_obj, vs_obj};
    if (arrays_get(data_obj, &data, objs, a, 4, RECORD_ARRAYS,
                   "the record arrays differ in length") < 0)
        return NULL;
    PyObject *result = NULL;
    Col cols[2];
    memset(cols, 0, sizeof cols);
    Py_ssize_t n = a[0].n;
    const uint8_t *buf = data.buf;
    int rc = OK;
    PyThreadState *released = PyEval_SaveThread();
    if (col_init(&cols[0], self->key, n) != OK || col_init(&cols[1], self->value, n) != OK)
        rc = NOMEM;
    for (Py_ssize_t i = 0; i < n && rc == OK; i++) {
        const uint8_t *key, *value;
        uint64_t key_size, value_size;
        if (row_of(buf, data.len, ints_at(&a[0], i), ints_at(&a[1], i), self->rocks, 0, &key,
                   &key_size) != OK ||
            row_of(buf, data.len, ints_at(&a[2], i), ints_at(&a[3], i), self->rocks, 1, &value,
                   &value_size) != OK) {
            rc = BAIL;
            break;
        }
        if ((rc = col_struct(&cols[0], i, key, key_size)) != OK) break;
        rc = col_struct(&cols[1], i, value, value_size);
    }
    PyEval_RestoreThread(released);
    if (rc == NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == BAIL) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    result = PyList_New(0);
    if (result == NULL || col_emit(&cols[0], n, result) < 0 || col_emit(&cols[1], n, result) < 0)
        Py_CLEAR(result);
done:
    col_free(&cols[0]);
    col_free(&cols[1]);
    arrays_release(&data, a, 4);
    return result;
}

static PyObject *format_jsonl(Format *self, PyObject *args) { return format_rows(self, args, 0); }
static PyObject *format_csv(Format *self, PyObject *args) { return format_rows(self, args, 1); }

static PyMethodDef format_methods[] = {
    {"jsonl", (PyCFunction)format_jsonl, METH_VARARGS,
     "jsonl(partition, data, key_offsets, key_sizes, value_offsets, value_sizes) -> bytes or "
     "None: the records' JSON lines, or None when one must take the reference path."},
    {"csv", (PyCFunction)format_csv, METH_VARARGS,
     "csv(partition, data, key_offsets, key_sizes, value_offsets, value_sizes) -> bytes or "
     "None: the records' CSV rows (no header), or None as for jsonl."},
    {"columns", (PyCFunction)format_columns, METH_VARARGS,
     "columns(data, key_offsets, key_sizes, value_offsets, value_sizes) -> list or None: "
     "the key's and the value's plain values as Arrow buffers, a (null_count, validity, "
     "offsets, data) tuple per node in preorder; None as for jsonl (and for arrays)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FormatType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ckpt_cli._kernel.Format",
    .tp_basicsize = sizeof(Format),
    .tp_dealloc = (destructor)format_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = format_new,
    .tp_methods = format_methods,
    .tp_doc = "Format(key, value, rocks, repr_floats): one store's rows as text.",
};

/* ---- the module --------------------------------------------------------------------------- */

static PyObject *kernel_seed(PyObject *module, PyObject *args) {
    unsigned long long a, b;
    if (!PyArg_ParseTuple(args, "KK:seed", &a, &b)) return NULL;
    seed0 = a;
    seed1 = b | 1;
    Py_RETURN_NONE;
}

static PyObject *kernel_hash_bits(PyObject *module, PyObject *args) {
    unsigned long long bits;
    if (!PyArg_ParseTuple(args, "K:_hash_bits", &bits)) return NULL;
    hash_bits = bits;
    Py_RETURN_NONE;
}

static PyObject *kernel_float_text(PyObject *module, PyObject *args) {
    double x;
    int style;
    if (!PyArg_ParseTuple(args, "di:float_text", &x, &style)) return NULL;
    if (style < FLOAT_REPR || style > FLOAT_ARROW) {
        PyErr_SetString(PyExc_ValueError, "style is 0 (repr), 1 (orjson) or 2 (Arrow)");
        return NULL;
    }
    Out o = {NULL, 0, 0, NULL, {0}, {{0}}};
    int rc = put_double(&o, x, style);
    PyObject *r;
    if (rc == NOMEM)
        r = PyErr_NoMemory();
    else if (rc == BAIL) {
        Py_INCREF(Py_None);
        r = Py_None;
    } else
        r = PyUnicode_DecodeASCII(o.p, (Py_ssize_t)o.len, NULL);
    free(o.p);
    return r;
}

static PyMethodDef kernel_methods[] = {
    {"merge", kernel_merge, METH_VARARGS,
     "merge(data, segments, dedupe, keep_removes) -> Merged or None.\n\n"
     "The records of each segment (start, end, snapshot) of ``data`` in turn; with ``dedupe`` "
     "each key once (its first record's key, its last record's value, by first record), "
     "without ``keep_removes`` keys whose last record is a remove left out. None when a "
     "segment does not frame cleanly (or keys' hashes pile up): the caller's reader then "
     "reads the files and names the problem."},
    {"sst_records", kernel_sst_records, METH_VARARGS,
     "sst_records(blocks, sizes) -> (data, key_offsets, key_sizes, value_offsets, "
     "value_sizes, kinds, repeats) or None: the entries of consecutive decompressed SST data "
     "blocks, as formats/sst.block_records gives them (data: every key whole, then the "
     "blocks); None where that function raises."},
    {"sst_run", kernel_sst_run, METH_VARARGS,
     "sst_run(data, offsets, sizes, checksum_type, most) -> (data, key_offsets, key_sizes, "
     "value_offsets, value_sizes, kinds, repeats, decompressed) or None: the entries of the "
     "SST file data's blocks at offsets (sizes before their trailers), checked and "
     "decompressed to at most ``most`` bytes in all; None for another checksum than XXH3, "
     "another compression than LZ4, or where formats/sst would raise."},
    {"lz4_streams", kernel_lz4_streams, METH_VARARGS,
     "lz4_streams(files, ratio, floor, max_bytes) -> (data, ends) or None.\n\n"
     "Each file's Spark lz4 stream (LZ4Block blocks) decompressed, one after another into "
     "``data``, ``ends[i]`` where file i's bytes end; held to the inflation limits "
     "(Limits.allowed) after each block. None where formats/compression would raise (or "
     "the file is not an lz4 stream): the caller reads it and names the problem."},
    {"seed", kernel_seed, METH_VARARGS, "seed(a, b): the key hash's seed."},
    {"_hash_bits", kernel_hash_bits, METH_VARARGS,
     "_hash_bits(mask): keep only these bits of every key hash (tests: keys that collide)."},
    {"float_text", kernel_float_text, METH_VARARGS,
     "float_text(x, style) -> str or None: a double as repr (0), orjson (1) or Arrow (2) "
     "print it; None for inf and nan."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "_kernel",
    "The compiled replay kernel: framing, merging and formatting of one partition's records.",
    -1, kernel_methods,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    if (PyType_Ready(&ColumnType) < 0 || PyType_Ready(&MergedType) < 0 ||
        PyType_Ready(&FormatType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&kernel_module);
    if (m == NULL) return NULL;
    Py_INCREF(&FormatType);
    if (PyModule_AddObject(m, "Format", (PyObject *)&FormatType) < 0 ||
        PyModule_AddStringConstant(m, "SOURCE", KERNEL_SOURCE) < 0 ||
        PyModule_AddIntConstant(m, "MAX_PROBE", MAX_PROBE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
