// Runs in the diagram frame (chatapp/views/code_frames.py), a sandboxed document of its own: draws
// the Mermaid source the page posts and posts back the SVG, sized from its viewBox, or the
// parser's message. A classic script (a module would be fetched with CORS, which the frame's
// opaque origin does not pass). Draws one at a time, in the order asked.
{
  const stage = document.getElementById("stage");
  const mermaid = window.mermaid;
  const reply = (message) => window.parent.postMessage(message, "*");
  let queue = Promise.resolve();

  // Width and height in pixels from the viewBox, so the picture has a size of its own as an
  // image (Mermaid gives it width="100%" and a max-width style).
  function sized(svg) {
    const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
    const root = doc.documentElement;
    const box = (root.getAttribute("viewBox") || "").trim().split(/[\s,]+/).map(Number);
    if (box.length === 4 && box[2] > 0 && box[3] > 0) {
      root.setAttribute("width", String(Math.ceil(box[2])));
      root.setAttribute("height", String(Math.ceil(box[3])));
      root.style.removeProperty("max-width");
    }
    const title = root.querySelector(":scope > title")?.textContent || "";
    return { svg: new XMLSerializer().serializeToString(root), title };
  }

  async function draw(id, source, theme) {
    mermaid.initialize({
      startOnLoad: false,
      securityLevel: "strict",
      theme,
      htmlLabels: false,
      flowchart: { htmlLabels: false },
      maxTextSize: 20000,
      maxEdges: 500,
      suppressErrorRendering: true,
    });
    try {
      await mermaid.parse(source);
      const { svg } = await mermaid.render(`diagram-${id}`, source, stage);
      reply({ id, ...sized(svg) });
    } catch (error) {
      reply({ id, error: String(error?.message || error || "unknown error") });
    } finally {
      stage.replaceChildren();
    }
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window.parent || !mermaid) return;
    const { id, source, theme } = event.data || {};
    if (typeof id !== "number" || typeof source !== "string") return;
    queue = queue.then(() => draw(id, source, theme === "dark" ? "dark" : "default"));
  });
  reply({ ready: Boolean(mermaid) });
}
