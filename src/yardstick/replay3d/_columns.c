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

/* capture(pos, quat, t, step, index, xpos, xquat, now, played): one frame kept, as mujoco_poses reads it
   after each step: MjData's whole xpos and xquat copied into row `index` of the recorder's pos [F, B, 3] and
   quat [F, B, 4], `now` into t [F] and `played` into step [F]. The same as four numpy assignments, at a tenth
   of their cost in the loop (numpy's indexing is the cost there, not the ~2 KB it copies). */
static PyObject *capture(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "capture: pos, quat, t, step, index, xpos, xquat, now, played");
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[4]);
    double now = PyFloat_AsDouble(args[7]);
    long played = PyLong_AsLong(args[8]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer kept[4], source[2];
    int got = 0;
    PyObject *answer = NULL;
    for (; got < 4; got++)
        if (PyObject_GetBuffer(args[got], &kept[got], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    for (; got < 6; got++)
        if (PyObject_GetBuffer(args[got + 1], &source[got - 4], PyBUF_C_CONTIGUOUS) < 0) goto done;
    Py_ssize_t frames = kept[2].len / 8;
    if (index < 0 || index >= frames || kept[3].len != frames * 4 || source[0].len * frames != kept[0].len ||
        source[1].len * frames != kept[1].len || source[0].len * 4 != source[1].len * 3) {
        PyErr_SetString(PyExc_ValueError, "capture: pos [F, B, 3], quat [F, B, 4], t [F], step [F] (int32), "
                                          "0 <= index < F, xpos [B, 3], xquat [B, 4]");
        goto done;
    }
    memcpy((char *)kept[0].buf + index * source[0].len, source[0].buf, (size_t)source[0].len);
    memcpy((char *)kept[1].buf + index * source[1].len, source[1].buf, (size_t)source[1].len);
    ((double *)kept[2].buf)[index] = now;
    ((int32_t *)kept[3].buf)[index] = (int32_t)played;
    answer = Py_None;
    Py_INCREF(answer);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(i < 4 ? &kept[i] : &source[i - 4]);
    return answer;
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS, "An episode's rest orientations and varints (see the file's comment)."},
    {"capture", (PyCFunction)(void (*)(void))capture, METH_FASTCALL, "One frame's poses kept (see its comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns", "The numbers of a .seqreplay in one pass (replay3d.format).", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) { return PyModule_Create(&module); }
