// The replay page's modules for a page opened as a file. Chromium loads no module script from a file://
// URL (a module is fetched with CORS, and a file has no origin), but a classic <script> it loads, and a
// module from a blob: URL the page made. So the run folder's viewer/modules.js holds each module's source
// as a string (`modules`, by its path under the package's static folder) and this links them: each
// module's imports are pointed at its dependencies' blob URLs (made first), then the entry is imported.
// Specifiers resolve as the platform's import map has them: "three" and "three/addons/..." to the
// vendored files, "./x.js" and "../x.js" beside the importing module.
function yardstickLink(modules, entry) {
  var IMPORTS = { "three": "three/build/three.module.js" };
  var ADDONS = "three/addons/";
  var urls = {}, linking = {};

  function resolve(from, spec) {
    if (spec in IMPORTS) return IMPORTS[spec];
    if (spec.indexOf(ADDONS) === 0) return "three/examples/jsm/" + spec.slice(ADDONS.length);
    if (spec.indexOf("./") !== 0 && spec.indexOf("../") !== 0) return null;
    var parts = from.split("/").slice(0, -1);
    spec.split("/").forEach(function (part) {
      if (part === "..") parts.pop();
      else if (part !== ".") parts.push(part);
    });
    return parts.join("/");
  }

  function link(name) {
    if (urls[name]) return urls[name];
    linking[name] = true;
    // `from "x"` and `import "x"`; a match inside a comment that names no module here, or the module
    // itself (a doc comment's example), is left as it is.
    var source = modules[name].replace(/(\bfrom\s*|\bimport\s*)(["'])([^"']+)\2/g, function (all, head, quote, spec) {
      var target = resolve(name, spec);
      if (target === null || !(target in modules) || linking[target]) return all;
      return head + quote + link(target) + quote;
    });
    linking[name] = false;
    urls[name] = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    return urls[name];
  }

  return import(link(entry));
}
