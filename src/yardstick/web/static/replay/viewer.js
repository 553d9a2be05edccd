// One episode's 3D replay drawn with three.js: the scene (a glTF binary whose nodes hang flat under
// `seq_root`, which turns the simulator's Z-up world into Y-up) and, per frame, the recorded nodes' poses
// (what moves, and the fixtures its benchmark places each episode, which the scene marks `fixed`).
// A replay's pose is a node's world pose, Z up; under `seq_root` that is the node's local transform, so a
// frame is applied by setting each node's position and quaternion, nothing else.

import * as THREE from "three";
import { GLTFLoader } from "three/addons/loaders/GLTFLoader.js";
import { OrbitControls } from "three/addons/controls/OrbitControls.js";

// The node to follow, by name, in this order of preference (Meta-World's `rightclaw`, robosuite's
// `gripper0_...`, dm_control's `.../gripper_link`), among the nodes that are not fixtures first (a fixture's
// `handle` is no hand); failing all, the first node that is not a fixture.
const GRIPPER = [/grip/i, /hand/i, /eef|end_?effector|tcp/i, /claw/i, /finger/i, /wrist/i];

/** The index among `nodes` of the node a camera following the gripper follows (-1: none); `fixed`, for
 *  each node, whether the scene marks it a fixture. */
export function gripperOf(nodes, fixed = nodes.map(() => false)) {
  const loose = nodes.map((_, n) => n).filter((n) => !fixed[n]);
  for (const among of [loose, nodes.map((_, n) => n)]) {
    for (const pattern of GRIPPER) {
      const found = among.find((n) => pattern.test(nodes[n]));
      if (found !== undefined) return found;
    }
  }
  return loose.length ? loose[0] : nodes.length ? 0 : -1;
}

/** Whether WebGL is drawn in software here: its renderer's name, where the browser tells it. */
function softwareRendered() {
  const gl = document.createElement("canvas").getContext("webgl2");
  const info = gl && gl.getExtension("WEBGL_debug_renderer_info");
  const name = info ? String(gl.getParameter(info.UNMASKED_RENDERER_WEBGL)) : "";
  gl?.getExtension("WEBGL_lose_context")?.loseContext();
  return /swiftshader|llvmpipe|software/i.test(name);
}

/** The last frame at or before `time` (seconds since the reset): frames are in time order. */
export function frameAt(t, time) {
  let low = 0, high = t.length - 1;
  if (high < 0) return -1;
  if (time >= t[high]) return high;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (t[mid] <= time) low = mid;
    else high = mid - 1;
  }
  return low;
}

export class ReplayView {
  constructor(container) {
    this.container = container;
    // Multisampling doubles a frame's cost where WebGL is drawn in software (SwiftShader, llvmpipe: a
    // headless browser, a machine without a GPU): kept for GPUs only.
    this.renderer = new THREE.WebGLRenderer({ antialias: !softwareRendered() });
    this.renderer.setPixelRatio(Math.min(window.devicePixelRatio || 1, 2));
    this.renderer.outputColorSpace = THREE.SRGBColorSpace;
    container.appendChild(this.renderer.domElement);
    this.scene = new THREE.Scene();
    this.scene.background = new THREE.Color(0xe8ecf1);
    this.scene.add(new THREE.HemisphereLight(0xffffff, 0x8d8d8d, 2.0));
    const sun = new THREE.DirectionalLight(0xffffff, 2.0);
    sun.position.set(2, 4, 3);
    this.scene.add(sun);
    this.camera = new THREE.PerspectiveCamera(45, 1, 0.01, 100);
    this.controls = new OrbitControls(this.camera, this.renderer.domElement);
    this.controls.addEventListener("change", () => this.draw());
    this.follow = false;
    this.frame = -1;
    this.drawn = 0; // frames drawn: the bench reads it
    new ResizeObserver(() => this.resize()).observe(container);
    this.resize();
  }

  /** The scene's bytes (a .glb) and the replay (readReplay's): builds the scene, shows frame 0. */
  async load(glb, replay) {
    const buffer = glb.buffer.slice(glb.byteOffset, glb.byteOffset + glb.byteLength);
    const gltf = await new GLTFLoader().parseAsync(buffer, "");
    this.replay = replay;
    this.root = gltf.scene;
    this.scene.add(gltf.scene);
    // three renames nodes (it drops '/', '.', ':'): a node is found by its index in the file instead.
    const byName = new Map();
    gltf.scene.traverse((object) => {
      const found = gltf.parser.associations.get(object);
      if (found && found.nodes !== undefined) byName.set(gltf.parser.json.nodes[found.nodes].name, object);
    });
    this.objects = replay.nodes.map((name) => byName.get(name) || null);
    // A fixture (the scene marks it: fixed to the world, placed anew each episode) is not what a view frames.
    const fixed = this.objects.map((object) => Boolean(object && object.userData.fixed));
    this.framed = this.objects.filter((object, n) => object && !fixed[n]);
    if (!this.framed.length) this.framed = this.objects.filter((object) => object);
    this.looks = new Looks(replay.looks, byName);
    this.followed = gripperOf(replay.nodes, fixed);
    this.setFrame(0);
    this.frameView();
  }

  /** The camera placed to see the recorded nodes but fixtures (the robot and what it may move), whether or
   *  not they move in this episode, from in front of the robot: from its base (the first of them) through
   *  their middle and on, turned a little, from above. */
  frameView() {
    const box = new THREE.Box3();
    for (const object of this.framed) box.expandByObject(object);
    if (box.isEmpty()) box.setFromObject(this.root);
    const center = box.getCenter(new THREE.Vector3());
    const size = Math.max(...box.getSize(new THREE.Vector3()).toArray(), 0.2);
    const base = this.framed[0];
    const ahead = base ? center.clone().sub(base.getWorldPosition(new THREE.Vector3())) : new THREE.Vector3();
    ahead.y = 0; // on the floor (Y up)
    if (ahead.lengthSq() < 1e-6) ahead.set(1, 0, 1);
    ahead.normalize().applyAxisAngle(new THREE.Vector3(0, 1, 0), 0.6);
    const direction = new THREE.Vector3(ahead.x, 0.8, ahead.z).normalize();
    this.camera.position.copy(center).addScaledVector(direction, size * 1.8);
    this.controls.target.copy(center);
    this.camera.near = size / 100;
    this.camera.far = size * 100;
    this.camera.updateProjectionMatrix();
    this.controls.update();
    this.draw();
  }

  /** Frame `index`'s poses and looks; the camera moves with the gripper when following it. */
  setFrame(index) {
    const replay = this.replay;
    if (!replay || index < 0 || index >= replay.frames) return;
    const count = replay.nodes.length;
    for (let n = 0; n < count; n++) {
      const object = this.objects[n];
      if (!object) continue;
      const p = (index * count + n) * 3, q = (index * count + n) * 4;
      object.position.set(replay.pos[p], replay.pos[p + 1], replay.pos[p + 2]);
      object.quaternion.set(replay.quat[q + 1], replay.quat[q + 2], replay.quat[q + 3], replay.quat[q]);
    }
    this.looks.apply(index);
    this.frame = index;
    if (this.follow) this.track();
    this.draw();
  }

  /** Keep the followed node where it is on screen: the target and the camera move by its motion. */
  track() {
    const object = this.objects[this.followed];
    if (!object) return;
    this.root.updateMatrixWorld();
    const at = object.getWorldPosition(new THREE.Vector3());
    const moved = at.clone().sub(this.controls.target);
    this.camera.position.add(moved);
    this.controls.target.copy(at);
    this.controls.update();
  }

  setFollow(on) {
    this.follow = on;
    if (on) this.track();
    this.draw();
  }

  resize() {
    const width = Math.max(this.container.clientWidth, 1), height = Math.max(this.container.clientHeight, 1);
    this.renderer.setSize(width, height, false);
    this.camera.aspect = width / height;
    this.camera.updateProjectionMatrix();
    this.draw();
  }

  draw() {
    this.renderer.render(this.scene, this.camera);
    this.drawn++;
  }
}

/** The replay's look changes (colours, visibility), applied up to a frame; stepping back starts over. */
class Looks {
  constructor(looks, byName) {
    this.looks = looks; // [[frame, node, change]], in frame order
    this.applied = 0; // how many of them hold now
    this.saved = new Map(); // node: how it looked in the scene
    for (const [, name] of looks) {
      const object = byName.get(name);
      if (!object || this.saved.has(name)) continue;
      const meshes = [];
      object.traverse((child) => {
        if (child.isMesh) {
          child.material = child.material.clone(); // its own: a colour change touches this node alone
          meshes.push({ mesh: child, color: child.material.color.clone(), opacity: child.material.opacity });
        }
      });
      this.saved.set(name, { object, visible: object.visible, meshes });
    }
  }

  apply(frame) {
    if (!this.looks.length) return;
    if (this.applied && this.looks[this.applied - 1][0] > frame) this.reset();
    while (this.applied < this.looks.length && this.looks[this.applied][0] <= frame) {
      const [, name, change] = this.looks[this.applied++];
      const node = this.saved.get(name);
      if (!node) continue;
      if ("visible" in change) node.object.visible = change.visible;
      if (change.rgba) {
        for (const { mesh } of node.meshes) {
          mesh.material.color.setRGB(change.rgba[0], change.rgba[1], change.rgba[2], THREE.LinearSRGBColorSpace);
          mesh.material.opacity = change.rgba[3];
          mesh.material.transparent = change.rgba[3] < 1;
        }
      }
    }
  }

  reset() {
    for (const node of this.saved.values()) {
      node.object.visible = node.visible;
      for (const { mesh, color, opacity } of node.meshes) {
        mesh.material.color.copy(color);
        mesh.material.opacity = opacity;
        mesh.material.transparent = opacity < 1;
      }
    }
    this.applied = 0;
  }
}
