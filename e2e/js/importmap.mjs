// Prints an import map (JSON) that lets a browser load the npm packages named on the command
// line as native ES modules straight from node_modules, with no bundler: it follows every
// static and dynamic import of their files and resolves each bare specifier as Node does (the
// package's "exports", the "browser"/"import" conditions), from the importing file. Paths are
// served under the prefix GATEHOUSE_MODULES_PREFIX (default /node_modules/). Used by
// e2e/passkey_client_browser_test.go:
//
//   node --experimental-import-meta-resolve --conditions=browser e2e/js/importmap.mjs better-auth/client @better-auth/passkey/client

import { readFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import path from "node:path";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const modules = pathToFileURL(path.join(root, "node_modules") + path.sep).href;
const prefix = process.env.GATEHOUSE_MODULES_PREFIX || "/node_modules/";
const served = (url) => {
  if (!url.startsWith(modules)) throw new Error(`${url} is outside node_modules`);
  return prefix + url.slice(modules.length);
};

const importRE = /(?:^|[\s;})])(?:import|export)\s*(?:[\w*{}\s,$]+?\s*from\s*)?["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;
const imports = {};
const scopes = {};
const seen = new Set();
const queue = [];

const entryParent = pathToFileURL(path.join(root, "package.json")).href;
for (const spec of process.argv.slice(2)) {
  const url = import.meta.resolve(spec, entryParent);
  imports[spec] = served(url);
  queue.push(url);
}
while (queue.length > 0) {
  const file = queue.pop();
  if (seen.has(file)) continue;
  seen.add(file);
  const source = readFileSync(fileURLToPath(file), "utf8");
  for (const m of source.matchAll(importRE)) {
    const spec = m[1] || m[2];
    if (spec.startsWith("node:")) continue;
    const url = import.meta.resolve(spec, file);
    if (!url.startsWith("file:")) continue;
    if (!spec.startsWith(".") && !spec.startsWith("/")) {
      const target = served(url);
      if (imports[spec] === undefined) imports[spec] = target;
      else if (imports[spec] !== target) (scopes[served(file)] ||= {})[spec] = target;
    }
    queue.push(url);
  }
}
process.stdout.write(JSON.stringify(Object.keys(scopes).length ? { imports, scopes } : { imports }));
