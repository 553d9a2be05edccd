// Reading a `.seqreplay` in the browser: the format yardstick.replay3d.format documents, undone step by step.
//
//   gzip( b"seqreplay 3\n" | header JSON line | (2 + 7 N) × F LEB128 varints )
//
// The varints are columns of F frames: t, step, each node's x y z, each node's w x y z, as integer counts
// (1 / header.t_scale s, pos_unit m, quat_unit), each stored as its second difference zigzagged. A node with a
// parent (header.parents[i] >= 0, always an earlier node) holds its pose in its parent's frame, and every
// node's quaternion is its turn from its rest (header.rest[i], counts): world poses are composed back here,
// parents first. All in plain numbers (float64): counts may pass 32 bits.

const MAGIC = "seqreplay 3\n";

/** The bytes of a gzip stream, inflated by the browser's own DecompressionStream. */
export async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** A `.seqreplay`'s bytes (gzipped, as stored) read into typed arrays:
 *  {engine, sceneSha256, nodes, frames, looks, meta, t, step, pos [F*N*3], quat [F*N*4] (w x y z)}, poses
 *  in the world. */
export async function readReplay(bytes) {
  const body = await gunzip(bytes);
  const magic = new TextDecoder().decode(body.subarray(0, MAGIC.length));
  if (magic !== MAGIC) throw new Error("not a .seqreplay of version 3 (the one this viewer reads)");
  const end = body.indexOf(10, MAGIC.length);
  if (end < 0) throw new Error("a .seqreplay whose header line is not ended");
  const header = JSON.parse(new TextDecoder().decode(body.subarray(MAGIC.length, end)));
  const frames = header.frames, count = header.nodes.length, width = 2 + 7 * count;
  const columns = decode(body.subarray(end + 1), frames, width);
  const t = new Float64Array(frames), step = new Int32Array(frames);
  for (let f = 0; f < frames; f++) {
    t[f] = columns[f] / header.t_scale; // divided, as format.py does: the same float64
    step[f] = columns[frames + f];
  }
  const { pos, quat } = compose(header, columns, frames, count);
  return {
    engine: header.engine,
    sceneSha256: header.scene_sha256,
    nodes: header.nodes,
    frames,
    looks: header.looks || [],
    meta: header.meta || {},
    t,
    step,
    pos,
    quat,
  };
}

/** Float64Array[width * frames], column by column, back from the varints: each zigzag undone, then two
 *  running sums (c[0] = r[0], c[1] = r[1] + c[0], c[f] = r[f] + 2 c[f-1] - c[f-2]). */
function decode(bytes, frames, width) {
  const out = new Float64Array(width * frames);
  let at = 0;
  for (let s = 0; s < width; s++) {
    let count = 0, change = 0;
    for (let f = 0; f < frames; f++) {
      let zigzag = 0, scale = 1, byte;
      do {
        if (at >= bytes.length) throw new Error("a .seqreplay cut short");
        byte = bytes[at++];
        zigzag += (byte & 127) * scale;
        scale *= 128;
      } while (byte & 128);
      const residual = zigzag % 2 ? -(zigzag + 1) / 2 : zigzag / 2;
      if (f === 0) count = residual;
      else {
        change += residual; // the step from the frame before
        count += change;
      }
      out[s * frames + f] = count;
    }
  }
  if (at !== bytes.length) throw new Error("a .seqreplay with bytes past its numbers");
  return out;
}

/** The world poses, float32 [F*N*3] and [F*N*4], from the columns: each quaternion its rest's turn, each
 *  node with a parent composed onto it (p = p_parent + q_parent p conj(q_parent), q = q_parent q),
 *  quaternions normalised; in float64 as format.py's reader does, rounded to float32 at the end. */
function compose(header, columns, frames, count) {
  const pos = new Float64Array(frames * count * 3), quat = new Float64Array(frames * count * 4);
  const posAt = (i, k) => (2 + 3 * i + k) * frames, quatAt = (i, k) => (2 + 3 * count + 4 * i + k) * frames;
  for (let i = 0; i < count; i++) {
    const rest = normalised(header.rest[i].map((c) => c * header.quat_unit));
    const parent = header.parents[i];
    for (let f = 0; f < frames; f++) {
      let p = [0, 1, 2].map((k) => columns[posAt(i, k) + f] * header.pos_unit);
      let q = multiply(rest, [0, 1, 2, 3].map((k) => columns[quatAt(i, k) + f] * header.quat_unit));
      if (parent >= 0) {
        const pp = pos.subarray((f * count + parent) * 3, (f * count + parent) * 3 + 3);
        const pq = Array.from(quat.subarray((f * count + parent) * 4, (f * count + parent) * 4 + 4));
        const turned = multiply(multiply(pq, [0, ...p]), [pq[0], -pq[1], -pq[2], -pq[3]]);
        p = [pp[0] + turned[1], pp[1] + turned[2], pp[2] + turned[3]];
        q = multiply(pq, q);
      }
      pos.set(p, (f * count + i) * 3);
      quat.set(normalised(q), (f * count + i) * 4);
    }
  }
  return { pos: Float32Array.from(pos), quat: Float32Array.from(quat) };
}

/** The Hamilton product of two quaternions (w x y z). */
function multiply([aw, ax, ay, az], [bw, bx, by, bz]) {
  return [
    aw * bw - ax * bx - ay * by - az * bz,
    aw * bx + ax * bw + ay * bz - az * by,
    aw * by - ax * bz + ay * bw + az * bx,
    aw * bz + ax * by - ay * bx + az * bw,
  ];
}

/** q of length 1, its squares summed in w x y z order as format.py does (not Math.hypot, which may round
 *  otherwise): the two readers agree to the float32. */
function normalised(q) {
  const norm = Math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  return norm > 0 ? q.map((v) => v / norm) : q;
}

/** A trajectory.jsonl.gz's lines (step, robot_time, action, done, success, metrics), by step. */
export async function readTrajectory(bytes) {
  const text = new TextDecoder().decode(await gunzip(bytes));
  const byStep = new Map();
  for (const line of text.split("\n")) {
    if (line.trim()) {
      const row = JSON.parse(line);
      byStep.set(row.step, row);
    }
  }
  return byStep;
}
