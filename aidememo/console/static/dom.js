// Building the page without markup: every string becomes a text node (CONSOLE-5).
// `h(tag, props, ...children)`: props are element properties or `data-*`/`aria-*`/`role`
// attributes; an `href` must be a console route ("#/...") or a same-origin path ("/...").

const SAFE_ATTR = /^(data-[a-z-]+|aria-[a-z-]+|role|for|tabindex|datetime|scope|colspan)$/;

export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "href") {
      const href = String(value);
      if (!href.startsWith("#/") && !href.startsWith("/")) throw new Error("external link");
      el.setAttribute("href", href);
    } else if (key === "class") {
      el.className = String(value);
    } else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (SAFE_ATTR.test(key)) {
      el.setAttribute(key, String(value));
    } else if (key in el && !key.startsWith("inner") && !key.startsWith("outer")) {
      el[key] = value;
    } else {
      throw new Error("unknown property " + key);
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

export function bytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

export function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) + "Z" : "";
}

export function countdown(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  const m = Math.floor(s / 60);
  return m > 0 ? `${m}m ${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}
