/* The numbers of a .seqreplay (replay3d/format.py says what they are), made in one pass over an episode's poses.

   format.ReplayWriter makes the same bytes with numpy; this is that arithmetic written out, for the close of an
   episode, where numpy's cost is its calls (some hundred over arrays of a few thousand numbers: ~0.4 ms warm,
   twice that inside an eval's loop) rather than its arithmetic (~20 us here). Every floating-point operation is
   the one numpy does, in the same order (so the build turns off contraction into fused multiply-adds:
   -ffp-contract=off), and rounding is to the nearest even count, as np.rint rounds: both make the same file,
   which tests/test_replay3d.py holds them to. It keeps the interpreter's lock: the work is a few tens of
   microseconds, shorter than another thread could take the lock for once it had it.

   encode(t, step, pos, quat, parents, t_scale, pos_unit, quat_scale) -> (rest, body)
     t        float64[F]        seconds since the reset
     step     int32[F]          steps played at each frame
     pos      float64[F, N, 3]  world positions (metres)
     quat     float64[F, N, 4]  world orientations (w x y z), each part within the file's limits
     parents  int64[N]          each node's parent, -1 or a node before it
   rest: int64[N, 4] as bytes, each node's rest orientation in counts; body: the varints that follow the header. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double clipped(double part) { return part < -1.0 ? -1.0 : (part > 1.0 ? 1.0 : part); }

/* The Hamilton product a b, each part's four terms added left to right, as format._multiply adds them. */
static void multiply(const double a[4], const double b[4], double out[4]) {
    out[0] = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
    out[1] = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
    out[2] = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
    out[3] = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
}

static uint64_t zigzag(int64_t residual) { return ((uint64_t)residual << 1) ^ (uint64_t)(residual >> 63); }

static Py_ssize_t varint_size(uint64_t number) {
    Py_ssize_t size = 1;
    while (number > 0x7F) {
        number >>= 7;
        size++;
    }
    return size;
}

/* The straight-line guess's residual of a column's frame f (see format's docstring). */
static int64_t residual(const int64_t *column, Py_ssize_t f) {
    int64_t r = column[f];
    if (f >= 1) r -= column[f - 1];
    if (f >= 2) r -= column[f - 1] - column[f - 2];
    return r;
}

/* Each node's pose in its parent's frame, as format._relative makes it: the position into counts, the
   orientation into `local` for the quaternions' pass. */
static void relative(const double *pos, const double *quat, const int64_t *parents, Py_ssize_t frames,
                     Py_ssize_t nodes, double pos_unit, int64_t *counts, double *local) {
    for (Py_ssize_t f = 0; f < frames; f++) {
        for (Py_ssize_t n = 0; n < nodes; n++) {
            const double *p = pos + (f * nodes + n) * 3, *q = quat + (f * nodes + n) * 4;
            double turn[4] = {clipped(q[0]), clipped(q[1]), clipped(q[2]), clipped(q[3])};
            double up[4] = {1.0, 0.0, 0.0, 0.0}, at[3] = {0.0, 0.0, 0.0};
            if (parents[n] >= 0) {
                const double *pq = quat + (f * nodes + parents[n]) * 4, *pp = pos + (f * nodes + parents[n]) * 3;
                for (int k = 0; k < 4; k++) up[k] = clipped(pq[k]);
                for (int k = 0; k < 3; k++) at[k] = pp[k];
            }
            double dx = p[0] - at[0], dy = p[1] - at[1], dz = p[2] - at[2];
            /* The parent's inverse turn: w, and u = -(x, y, z); v' = v + w t + u x t, t = 2 u x v. */
            double inverse[4] = {up[0], -up[1], -up[2], -up[3]};
            double w = inverse[0], ux = inverse[1], uy = inverse[2], uz = inverse[3];
            double tx = 2 * (uy * dz - uz * dy), ty = 2 * (uz * dx - ux * dz), tz = 2 * (ux * dy - uy * dx);
            double turned[3] = {
                dx + w * tx + uy * tz - uz * ty,
                dy + w * ty + uz * tx - ux * tz,
                dz + w * tz + ux * ty - uy * tx,
            };
            for (int k = 0; k < 3; k++) counts[(2 + 3 * n + k) * frames + f] = (int64_t)nearbyint(turned[k] / pos_unit);
            multiply(inverse, turn, local + (f * nodes + n) * 4);
        }
    }
}

/* Each node's orientations signed so none flips from the frame before (format._continuous), its rest
   rounded from frame 0 and every frame's turn from it into counts. */
static void turns(const double *local, Py_ssize_t frames, Py_ssize_t nodes, double quat_scale, int64_t *counts,
                  int64_t *rest) {
    for (Py_ssize_t n = 0; n < nodes; n++) {
        double r[4] = {quat_scale, 0.0, 0.0, 0.0};
        if (frames > 0)
            for (int k = 0; k < 4; k++) r[k] = nearbyint(local[n * 4 + k] * quat_scale);
        for (int k = 0; k < 4; k++) rest[n * 4 + k] = (int64_t)r[k];
        double norm = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + r[3] * r[3]);
        if (!(norm > 0)) norm = 1.0;
        double undo[4] = {r[0] / norm, -(r[1] / norm), -(r[2] / norm), -(r[3] / norm)};
        double sign = 1.0;
        for (Py_ssize_t f = 0; f < frames; f++) {
            const double *q = local + (f * nodes + n) * 4;
            if (f > 0) {
                const double *before = local + ((f - 1) * nodes + n) * 4;
                double dot = -0.0; /* numpy's sum of four: from -0, in order */
                for (int k = 0; k < 4; k++) dot += q[k] * before[k];
                if (dot < 0) sign = -sign;
            }
            double signed_turn[4] = {q[0] * sign, q[1] * sign, q[2] * sign, q[3] * sign}, stored[4];
            multiply(undo, signed_turn, stored);
            for (int k = 0; k < 4; k++)
                counts[(2 + 3 * nodes + 4 * n + k) * frames + f] = (int64_t)nearbyint(stored[k] * quat_scale);
        }
    }
}

static PyObject *encode(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer t, step, pos, quat, parents;
    double t_scale, pos_unit, quat_scale;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*ddd", &t, &step, &pos, &quat, &parents, &t_scale, &pos_unit,
                          &quat_scale))
        return NULL;
    PyObject *answer = NULL;
    int64_t *counts = NULL, *rest = NULL;
    double *local = NULL;
    uint8_t *body = NULL;
    Py_ssize_t frames = t.len / 8, nodes = parents.len / 8, width = 2 + 7 * nodes;
    if (t.len % 8 || parents.len % 8 || step.len != frames * 4 || pos.len != frames * nodes * 24 ||
        quat.len != frames * nodes * 32) {
        PyErr_SetString(PyExc_ValueError, "encode: t [F], step [F], pos [F, N, 3], quat [F, N, 4], parents [N]");
        goto done;
    }
    const int64_t *parent = parents.buf;
    for (Py_ssize_t n = 0; n < nodes; n++) {
        if (parent[n] < -1 || parent[n] >= n) {
            PyErr_SetString(PyExc_ValueError, "encode: each node's parent is -1 or a node before it");
            goto done;
        }
    }
    counts = PyMem_Malloc(sizeof(int64_t) * (size_t)(width * frames + 1));
    rest = PyMem_Malloc(sizeof(int64_t) * (size_t)(4 * nodes + 1));
    local = PyMem_Malloc(sizeof(double) * (size_t)(4 * nodes * frames + 1));
    if (counts == NULL || rest == NULL || local == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const double *times = t.buf;
    const int32_t *steps = step.buf;
    for (Py_ssize_t f = 0; f < frames; f++) {
        counts[f] = (int64_t)nearbyint(times[f] * t_scale);
        counts[frames + f] = steps[f];
    }
    relative(pos.buf, quat.buf, parent, frames, nodes, pos_unit, counts, local);
    turns(local, frames, nodes, quat_scale, counts, rest);
    /* Column by column, each frame's residual zigzagged as a LEB128 varint: sized first, then written. */
    Py_ssize_t size = 0;
    for (Py_ssize_t m = 0; m < width; m++)
        for (Py_ssize_t f = 0; f < frames; f++) size += varint_size(zigzag(residual(counts + m * frames, f)));
    body = PyMem_Malloc((size_t)size + 1);
    if (body == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint8_t *at = body;
    for (Py_ssize_t m = 0; m < width; m++) {
        for (Py_ssize_t f = 0; f < frames; f++) {
            uint64_t number = zigzag(residual(counts + m * frames, f));
            for (; number > 0x7F; number >>= 7) *at++ = (uint8_t)((number & 0x7F) | 0x80);
            *at++ = (uint8_t)number;
        }
    }
    answer = Py_BuildValue("y#y#", (const char *)rest, (Py_ssize_t)(4 * nodes * sizeof(int64_t)),
                           (const char *)body, size);
done:
    PyBuffer_Release(&t);
    PyBuffer_Release(&step);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&quat);
    PyBuffer_Release(&parents);
    PyMem_Free(counts);
    PyMem_Free(rest);
    PyMem_Free(local);
    PyMem_Free(body);
    return answer;
}

/* Frames(xpos, xquat, rows): one episode's frames as mujoco_poses keeps them, in memory of its own. MjData's whole
   xpos [B, 3] and xquat [B, 4] are held (their buffers, for the episode) and each `take(step, t)` copies the rows
   `rows` of them as they are now (all of them in order: two memcpy), with the time and the step, into rows that
   double as they fill: one call a step, no argument to check but two numbers. `count` frames are kept;
   `picked(rows)` hands them over as bytearrays t [F] float64, step [F] int32, pos [F, R, 3] and quat [F, R, 4]
   float64, of the kept rows `rows` (None: all), gathered in one pass. */
typedef struct {
    PyObject_HEAD
    Py_buffer xpos, xquat;
    int held, whole;
    int64_t *rows;
    Py_ssize_t bodies, width, count, capacity;
    double *t, *pos, *quat;
    int32_t *step;
} Frames;

/* Whether `frames` frames of `width` rows fit in memory's sizes (a quaternion row, 32 bytes, is the widest). */
static int fits(Py_ssize_t frames, Py_ssize_t width) {
    return frames >= 0 && width >= 0 && frames <= PY_SSIZE_T_MAX / 32 / (width + 1);
}

/* A buffer of `what` holding 8-byte items of `format`'s kind ('d': float64; 'q', 'l': int64). */
static int eight_byte(Py_buffer *view, const char *what, const char *kinds) {
    const char *format = view->format == NULL ? "B" : view->format;
    if (*format == '<' || *format == '=' || *format == '@') format++;
    if (view->itemsize == 8 && format[0] != '\0' && format[1] == '\0' && strchr(kinds, format[0]) != NULL)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: %s, not items of format '%s'", what,
                 kinds[0] == 'd' ? "float64" : "int64", format);
    return -1;
}

static int frames_room(Frames *self, Py_ssize_t capacity) {
    if (!fits(capacity, self->width)) {
        PyErr_NoMemory();
        return -1;
    }
    double *t = PyMem_Realloc(self->t, sizeof(double) * (size_t)capacity);
    if (t != NULL) self->t = t;
    int32_t *step = PyMem_Realloc(self->step, sizeof(int32_t) * (size_t)capacity);
    if (step != NULL) self->step = step;
    double *pos = PyMem_Realloc(self->pos, sizeof(double) * 3 * (size_t)(capacity * self->width + 1));
    if (pos != NULL) self->pos = pos;
    double *quat = PyMem_Realloc(self->quat, sizeof(double) * 4 * (size_t)(capacity * self->width + 1));
    if (quat != NULL) self->quat = quat;
    if (t == NULL || step == NULL || pos == NULL || quat == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->capacity = capacity;
    return 0;
}

/* Rows [R] int64 each within [0, limit): copied into `*kept` (PyMem), their count into `*width`. */
static int rows_of(PyObject *given, Py_ssize_t limit, int64_t **kept, Py_ssize_t *width) {
    Py_buffer rows;
    if (PyObject_GetBuffer(given, &rows, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    int answer = -1;
    if (eight_byte(&rows, "rows", "ql") < 0) goto done;
    const int64_t *row = rows.buf;
    *width = rows.len / 8;
    if (rows.len % 8) {
        PyErr_SetString(PyExc_ValueError, "rows: int64 [R]");
        goto done;
    }
    for (Py_ssize_t r = 0; r < *width; r++) {
        if (row[r] < 0 || row[r] >= limit) {
            PyErr_Format(PyExc_ValueError, "rows: each row within 0..%zd, not %lld", limit - 1, (long long)row[r]);
            goto done;
        }
    }
    *kept = PyMem_Malloc(sizeof(int64_t) * (size_t)(*width + 1));
    if (*kept == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(*kept, row, (size_t)rows.len);
    answer = 0;
done:
    PyBuffer_Release(&rows);
    return answer;
}

static int frames_init(Frames *self, PyObject *args, PyObject *kwargs) {
    PyObject *xpos, *xquat, *rows;
    Py_ssize_t capacity = 512;
    static char *names[] = {"xpos", "xquat", "rows", "capacity", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|n", names, &xpos, &xquat, &rows, &capacity)) return -1;
    if (self->held) {
        PyErr_SetString(PyExc_TypeError, "Frames: made once");
        return -1;
    }
    if (PyObject_GetBuffer(xpos, &self->xpos, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (PyObject_GetBuffer(xquat, &self->xquat, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&self->xpos);
        return -1;
    }
    self->held = 1;
    if (eight_byte(&self->xpos, "xpos", "d") < 0 || eight_byte(&self->xquat, "xquat", "d") < 0) return -1;
    self->bodies = self->xpos.len / 24;
    if (self->xpos.len % 24 || self->xquat.len != self->bodies * 32) {
        PyErr_SetString(PyExc_ValueError, "Frames: xpos [B, 3] and xquat [B, 4], float64");
        return -1;
    }
    if (rows_of(rows, self->bodies, &self->rows, &self->width) < 0) return -1;
    self->whole = self->width == self->bodies;
    for (Py_ssize_t r = 0; self->whole && r < self->width; r++) self->whole = self->rows[r] == r;
    return frames_room(self, capacity < 1 ? 1 : capacity);
}

static void frames_dealloc(Frames *self) {
    if (self->held) {
        PyBuffer_Release(&self->xpos);
        PyBuffer_Release(&self->xquat);
    }
    PyMem_Free(self->rows);
    PyMem_Free(self->t);
    PyMem_Free(self->step);
    PyMem_Free(self->pos);
    PyMem_Free(self->quat);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *frames_take(Frames *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "take(step, t)");
        return NULL;
    }
    if (self->capacity == 0) { /* its __init__ raised, or was never called: set once all its memory is */
        PyErr_SetString(PyExc_TypeError, "take: the Frames were never made");
        return NULL;
    }
    long played = PyLong_AsLong(args[0]);
    double now = PyFloat_AsDouble(args[1]);
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t index = self->count, width = self->width;
    if (index == self->capacity && frames_room(self, self->capacity > PY_SSIZE_T_MAX / 2 ? -1 : 2 * index) < 0)
        return NULL;
    double *pos = self->pos + index * width * 3, *quat = self->quat + index * width * 4;
    if (self->whole) {
        memcpy(pos, self->xpos.buf, (size_t)self->xpos.len);
        memcpy(quat, self->xquat.buf, (size_t)self->xquat.len);
    } else {
        const double *xpos = self->xpos.buf, *xquat = self->xquat.buf;
        for (Py_ssize_t r = 0; r < width; r++) {
            memcpy(pos + r * 3, xpos + self->rows[r] * 3, 24);
            memcpy(quat + r * 4, xquat + self->rows[r] * 4, 32);
        }
    }
    self->t[index] = now;
    self->step[index] = (int32_t)played;
    self->count = index + 1;
    Py_RETURN_NONE;
}

static PyObject *frames_picked(Frames *self, PyObject *given) {
    int64_t *row = NULL;
    Py_ssize_t width = self->width, count = self->count;
    if (self->capacity == 0) {
        PyErr_SetString(PyExc_TypeError, "picked: the Frames were never made");
        return NULL;
    }
    if (given != Py_None && rows_of(given, self->width, &row, &width) < 0) return NULL;
    if (!fits(count, width)) {
        PyMem_Free(row);
        return PyErr_NoMemory();
    }
    PyObject *t = NULL, *step = NULL, *pos = NULL, *quat = NULL, *answer = NULL;
    t = PyByteArray_FromStringAndSize((const char *)self->t, count * 8);
    step = PyByteArray_FromStringAndSize((const char *)self->step, count * 4);
    if (row == NULL) {
        pos = PyByteArray_FromStringAndSize((const char *)self->pos, count * width * 24);
        quat = PyByteArray_FromStringAndSize((const char *)self->quat, count * width * 32);
    } else {
        pos = PyByteArray_FromStringAndSize(NULL, count * width * 24);
        quat = PyByteArray_FromStringAndSize(NULL, count * width * 32);
    }
    if (t == NULL || step == NULL || pos == NULL || quat == NULL) goto done;
    if (row != NULL) {
        double *p = (double *)PyByteArray_AS_STRING(pos), *q = (double *)PyByteArray_AS_STRING(quat);
        for (Py_ssize_t f = 0; f < count; f++) {
            const double *fp = self->pos + f * self->width * 3, *fq = self->quat + f * self->width * 4;
            for (Py_ssize_t r = 0; r < width; r++, p += 3, q += 4) {
                memcpy(p, fp + row[r] * 3, 24);
                memcpy(q, fq + row[r] * 4, 32);
            }
        }
    }
    answer = PyTuple_Pack(4, t, step, pos, quat);
done:
    Py_XDECREF(t);
    Py_XDECREF(step);
    Py_XDECREF(pos);
    Py_XDECREF(quat);
    PyMem_Free(row);
    return answer;
}

static PyObject *frames_count(Frames *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->count);
}

static PyMethodDef frames_methods[] = {
    {"take", (PyCFunction)(void (*)(void))frames_take, METH_FASTCALL, "take(step, t): the rows' poses now."},
    {"picked", (PyCFunction)frames_picked, METH_O, "picked(rows): (t, step, pos, quat) of those kept rows."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef frames_getset[] = {
    {"count", (getter)frames_count, NULL, "frames kept", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FramesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "yardstick.replay3d._columns.Frames",
    .tp_basicsize = sizeof(Frames),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One episode's frames of MjData's xpos and xquat (see the comment above it).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)frames_init,
    .tp_dealloc = (destructor)frames_dealloc,
    .tp_methods = frames_methods,
    .tp_getset = frames_getset,
};

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS, "An episode's rest orientations and varints (see the file's comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns", "The numbers of a .seqreplay in one pass (replay3d.format).", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) {
    if (PyType_Ready(&FramesType) < 0) return NULL;
    PyObject *made = PyModule_Create(&module);
    if (made == NULL) return NULL;
    Py_INCREF(&FramesType);
    if (PyModule_AddObject(made, "Frames", (PyObject *)&FramesType) < 0) {
        Py_DECREF(&FramesType);
        Py_DECREF(made);
        return NULL;
    }
    return made;
}
