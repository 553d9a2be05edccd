// The replay page: one episode's 3D replay, or two side by side on one clock (the same task and seed
// played by two policies), with play, pause, scrub, speed, follow-the-gripper, and under the timeline each
// episode's step: the action it played and the metrics it got (from its trajectory, where recorded).
//
// The page says what to show in a JSON block (#replay-config): per pane its title, outcome and the URLs of
// its replay, scene and trajectory. Served by the platform, those are fetched. Opened from a run folder
// as a file, fetch is refused (Chromium reads no file:// URL from a page), so each file has a sibling
// script `<data><url>.js` that hands over its bytes in base64: a <script> loads from file:// where fetch
// cannot.

import { frameAt, ReplayView } from "./viewer.js";
import { readReplay, readTrajectory } from "./seqreplay.js";

const config = JSON.parse(document.getElementById("replay-config").textContent);
const files = new Map(); // url: the promise of its bytes (two panes in one scene read it once)

function bytesOf(url) {
  if (!files.has(url)) files.set(url, config.mode === "fetch" ? fetched(url) : fromScript(url));
  return files.get(url);
}

async function fetched(url) {
  const answer = await fetch(url);
  if (!answer.ok) throw new Error(`${url}: ${answer.status} ${answer.statusText}`);
  return new Uint8Array(await answer.arrayBuffer());
}

function fromScript(url) {
  const held = (window.YardstickData ||= {});
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = config.data + url + ".js";
    script.onload = () => (url in held ? resolve(base64(held[url])) : reject(new Error(`${script.src} held no ${url}`)));
    script.onerror = () => reject(new Error(`${script.src} could not be read`));
    document.head.appendChild(script);
  });
}

function base64(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

function element(tag, attributes = {}, ...children) {
  const made = Object.assign(document.createElement(tag), attributes);
  made.append(...children);
  return made;
}

const number = (value) => (typeof value === "number" ? (Number.isInteger(value) ? String(value) : value.toFixed(3)) : String(value));

class Pane {
  constructor(spec, index) {
    this.spec = spec;
    this.stage = element("div", { className: "stage" });
    this.section = element(
      "section",
      { className: "pane" },
      element(
        "h2",
        {},
        element("span", { className: "title" }, spec.title),
        " ",
        element("span", { className: `outcome ${spec.outcome}` }, spec.outcome || ""),
      ),
      element("div", { className: "subtitle muted" }, spec.subtitle || ""),
      this.stage,
    );
    this.section.dataset.pane = String(index);
    this.readout = element("div", { className: "readout" });
    this.readout.dataset.pane = String(index);
  }

  async load() {
    const [replay, glb, trajectory] = await Promise.all([
      bytesOf(this.spec.replay).then(readReplay),
      bytesOf(this.spec.scene),
      this.spec.trajectory ? bytesOf(this.spec.trajectory).then(readTrajectory) : Promise.resolve(null),
    ]);
    this.replay = replay;
    this.trajectory = trajectory;
    this.view = new ReplayView(this.stage);
    await this.view.load(glb, replay);
    this.duration = replay.frames ? replay.t[replay.frames - 1] : 0;
  }

  show(time) {
    const frame = frameAt(this.replay.t, time);
    if (frame !== this.view.frame) {
      this.view.setFrame(frame);
      this.describe(frame);
    }
  }

  /** The step under the timeline: the frame's step, the action that led to it, the metrics it got. */
  describe(frame) {
    const replay = this.replay, step = replay.step[frame];
    const last = replay.step[replay.frames - 1];
    const lines = [element("div", { className: "where" }, `${this.spec.title}: step ${step} of ${last} · ${replay.t[frame].toFixed(2)} s`)];
    // A trajectory's line `s` is the step played from frame s's state: frame s shows its result, line s - 1.
    const row = this.trajectory && step > 0 ? this.trajectory.get(step - 1) : null;
    if (row) {
      lines.push(element("div", { className: "action" }, "action ", element("code", {}, `[${row.action.map(number).join(", ")}]`)));
      const metrics = Object.entries(row.metrics || {});
      if (metrics.length) {
        lines.push(element("div", { className: "metrics" }, ...metrics.map(([k, v]) => element("span", {}, `${k} ${number(v)}`))));
      }
      if (row.done) lines.push(element("div", { className: row.success ? "Success" : "Failure" }, row.success ? "done: success" : "done"));
    } else if (step === 0) {
      lines.push(element("div", { className: "muted" }, "the reset: no action yet"));
    } else if (!this.trajectory) {
      lines.push(element("div", { className: "muted" }, "actions and metrics: record the trajectory too (--record trajectory)"));
    }
    this.readout.replaceChildren(...lines);
  }
}

class Player {
  constructor(panes) {
    this.panes = panes;
    this.clock = 0;
    this.speed = 1;
    this.playing = false;
    this.duration = Math.max(...panes.map((pane) => pane.duration), 0);
    this.button = document.getElementById("play");
    this.scrub = document.getElementById("scrub");
    this.time = document.getElementById("clock");
    this.button.addEventListener("click", () => (this.playing ? this.pause() : this.play()));
    this.scrub.addEventListener("input", () => this.seek((this.scrub.valueAsNumber / 1000) * this.duration));
    document.getElementById("speed").addEventListener("change", (event) => (this.speed = Number(event.target.value)));
    document.getElementById("follow").addEventListener("change", (event) => {
      for (const pane of panes) pane.view.setFollow(event.target.checked);
    });
    document.getElementById("reset-view").addEventListener("click", () => {
      for (const pane of panes) pane.view.frameView();
    });
    this.seek(0);
  }

  play() {
    if (this.clock >= this.duration) this.clock = 0;
    this.playing = true;
    this.button.textContent = "pause";
    let before = performance.now();
    const tick = (now) => {
      if (!this.playing) return;
      this.seek(this.clock + ((now - before) / 1000) * this.speed);
      before = now;
      if (this.clock >= this.duration) this.pause();
      else requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }

  pause() {
    this.playing = false;
    this.button.textContent = "play";
  }

  seek(time) {
    this.clock = Math.min(Math.max(time, 0), this.duration);
    for (const pane of this.panes) pane.show(this.clock);
    this.scrub.value = String(this.duration ? Math.round((this.clock / this.duration) * 1000) : 0);
    this.time.textContent = `${this.clock.toFixed(2)} / ${this.duration.toFixed(2)} s`;
  }

  /** Draw `count` frames back to back, each finished by the GPU: frames a second this machine can draw. */
  measure(count) {
    const started = performance.now();
    for (let i = 0; i < count; i++) {
      for (const pane of this.panes) {
        pane.view.setFrame(i % pane.replay.frames);
        const gl = pane.view.renderer.getContext();
        gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, new Uint8Array(4)); // waits for the frame
      }
    }
    return (count * 1000) / (performance.now() - started);
  }
}

async function main() {
  const holder = document.getElementById("panes");
  const readouts = document.getElementById("readouts");
  // The episodes shown: those the page names, else those the address asks for (`?episode=3&episode=7`:
  // a run folder's one page serves every episode, and any two side by side).
  const asked = config.show || new URLSearchParams(location.search).getAll("episode");
  const specs = asked.map((index) => config.episodes[String(index)]);
  if (!specs.length || specs.some((spec) => !spec)) {
    throw new Error(`no 3D replay of episode ${asked.join(", ") || "(none named: ?episode=N)"} here`);
  }
  const panes = specs.slice(0, 2).map((spec, index) => new Pane(spec, index));
  holder.classList.toggle("two", panes.length > 1);
  for (const pane of panes) {
    holder.append(pane.section);
    readouts.append(pane.readout);
  }
  await Promise.all(panes.map((pane) => pane.load()));
  const player = new Player(panes);
  // Tests and the bench drive the page through this: the clock, playing, what each pane drew.
  window.yardstickReplay = {
    player,
    ready: true,
    state: () => ({
      clock: player.clock,
      playing: player.playing,
      duration: player.duration,
      frames: panes.map((pane) => pane.view.frame),
      drawn: panes.map((pane) => pane.view.drawn),
    }),
  };
}

main().catch((error) => {
  document.getElementById("problem").textContent = `This replay could not be shown: ${error.message}`;
  window.yardstickReplay = { failed: String(error) };
  throw error;
});
