// Reading a `.seqreplay` in the browser: the format yardstick.replay3d.format documents, undone step by step.
//
//   gzip( b"seqreplay 2\n" | header JSON line | t float64[F] | step int32[F] | pos planes | quat planes )
//
// pos and quat are integer counts on a grid (header.pos_unit metres, header.quat_unit), number by number
// (every frame of node 0's x, then its y, ...): each count stored as the residual of a straight-line guess
// from the two frames before (a second difference), zigzagged into a uint32, the uint32s written as four
// byte planes (every lowest byte, then every second byte, ...). Numbers are little-endian, as every
// browser's typed arrays are.

const MAGIC = "seqreplay 2\n";

/** The bytes of a gzip stream, inflated by the browser's own DecompressionStream. */
export async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** A `.seqreplay`'s bytes (gzipped, as stored) read into typed arrays:
 *  {engine, sceneSha256, nodes, frames, looks, meta, t, step, pos [F*N*3], quat [F*N*4] (w x y z)}. */
export async function readReplay(bytes) {
  const body = await gunzip(bytes);
  const magic = new TextDecoder().decode(body.subarray(0, MAGIC.length));
  if (magic !== MAGIC) throw new Error("not a .seqreplay of version 2 (the one this viewer reads)");
  const end = body.indexOf(10, MAGIC.length);
  if (end < 0) throw new Error("a .seqreplay whose header line is not ended");
  const header = JSON.parse(new TextDecoder().decode(body.subarray(MAGIC.length, end)));
  const frames = header.frames, count = header.nodes.length;
  const sizes = [8 * frames, 4 * frames, 12 * frames * count, 16 * frames * count];
  if (body.length - end - 1 !== sizes.reduce((a, b) => a + b, 0)) throw new Error("a .seqreplay cut short");
  let at = end + 1;
  const part = (size) => body.slice(at, (at += size)); // a copy: aligned for the typed arrays over it
  return {
    engine: header.engine,
    sceneSha256: header.scene_sha256,
    nodes: header.nodes,
    frames,
    looks: header.looks || [],
    meta: header.meta || {},
    t: new Float64Array(part(sizes[0]).buffer),
    step: new Int32Array(part(sizes[1]).buffer),
    pos: decode(part(sizes[2]), frames, count * 3, header.pos_unit),
    quat: decode(part(sizes[3]), frames, count * 4, header.quat_unit),
  };
}

/** float32[frames, signals] back from its byte planes: zigzag undone, then two running sums
 *  (c[0] = r[0], c[1] = r[1] + c[0], c[f] = r[f] + 2 c[f-1] - c[f-2]), each count times `unit`. */
function decode(planes, frames, signals, unit) {
  const words = frames * signals;
  const out = new Float32Array(words); // float64 count × unit rounded to float32, as format.py's reader does
  for (let s = 0; s < signals; s++) {
    let count = 0, change = 0;
    for (let f = 0; f < frames; f++) {
      const i = s * frames + f;
      const zigzag =
        (planes[i] | (planes[words + i] << 8) | (planes[2 * words + i] << 16) | (planes[3 * words + i] << 24)) >>> 0;
      const residual = (zigzag >>> 1) ^ -(zigzag & 1);
      if (f === 0) count = residual;
      else {
        change += residual; // the step from the frame before
        count += change;
      }
      out[f * signals + s] = count * unit;
    }
  }
  return out;
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
