// LoT editor of the Gantry console: CodeMirror 6 over a plain <textarea>.
// The textarea stays in the form (hidden) and mirrors the editor, so the
// form posts the same way with or without this script. Diagnostics come
// from the node's own parser (POST /ui/lot/check); drafts are saved on the
// node (POST /ui/lot/draft) so that they survive a reload.
import {EditorView, keymap, lineNumbers, highlightActiveLine, drawSelection} from "@codemirror/view";
import {EditorState} from "@codemirror/state";
import {StreamLanguage, syntaxHighlighting, HighlightStyle, indentUnit, bracketMatching} from "@codemirror/language";
import {defaultKeymap, history, historyKeymap} from "@codemirror/commands";
import {linter, lintGutter, lintKeymap} from "@codemirror/lint";
import {searchKeymap} from "@codemirror/search";
import {tags as t} from "@lezer/highlight";

const keywords = new Set(("DEFINE ACTION MODEL RULE CONNECTOR ROUTE ON TOPIC CHANGE EVERY START CONNECT DISCONNECT " +
  "SUBSCRIBE TIMESTAMP AT DO IF THEN ELSE ELSEIF END WHILE REPEAT FOR IN PUBLISH KEEP GET SET WITH AS TRIGGER " +
  "PAYLOAD POSITION CALL INPUT OUTPUT RETURN DESCRIPTION ADD FIELD FROM ENV SECRET JSON EMPTY AND OR NOT IS " +
  "EXISTS TRUE FALSE SECOND SECONDS MINUTE MINUTES HOUR HOURS DAY DAYS WEEKDAY WEEKEND ALLOW DENY TO USER " +
  "STORE FETCH CONFIG TYPE").split(" "));

const lot = StreamLanguage.define({
  name: "lot",
  token(stream) {
    if (stream.eatSpace()) return null;
    if (stream.match("//") || stream.match("--")) { stream.skipToEnd(); return "comment"; }
    if (stream.match(/^"(?:[^"\\]|\\.)*"?/)) return "string";
    if (stream.match(/^-?\d+(\.\d+)?/)) return "number";
    if (stream.match(/^[A-Za-z_][A-Za-z0-9_]*/)) {
      const w = stream.current();
      return keywords.has(w.toUpperCase()) && w === w.toUpperCase() ? "keyword" : "variableName";
    }
    stream.next();
    return "operator";
  },
  languageData: {commentTokens: {line: "//"}},
});

const style = HighlightStyle.define([
  {tag: t.keyword, color: "var(--code-keyword)", fontWeight: "600"},
  {tag: t.string, color: "var(--code-string)"},
  {tag: t.number, color: "var(--code-number)"},
  {tag: t.comment, color: "var(--code-comment)", fontStyle: "italic"},
]);

const theme = EditorView.theme({
  "&": {backgroundColor: "var(--surface)", color: "var(--fg)", border: "1px solid var(--border)", borderRadius: "6px"},
  ".cm-content": {fontFamily: "var(--mono)", caretColor: "var(--fg)", minHeight: "16rem"},
  ".cm-gutters": {backgroundColor: "var(--surface-2)", color: "var(--muted)", border: "none"},
  ".cm-activeLine": {backgroundColor: "var(--active-line)"},
  "&.cm-focused": {outline: "3px solid var(--focus)", outlineOffset: "2px"},
  ".cm-tooltip": {backgroundColor: "var(--surface)", color: "var(--fg)", border: "1px solid var(--border)"},
});

function csrf() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m ? m.content : "";
}

function post(url, body) {
  return fetch(url, {method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/x-www-form-urlencoded", "X-CSRF-Token": csrf()},
    body: new URLSearchParams(body)});
}

// Converts the node's {line, column, message, severity} into CodeMirror
// ranges: from the column to the end of the word there.
function toRanges(doc, diags) {
  return diags.map(d => {
    const line = doc.line(Math.min(Math.max(d.line, 1), doc.lines));
    const from = Math.min(line.from + Math.max(d.column - 1, 0), line.to);
    let to = from;
    const text = line.text.slice(from - line.from);
    const m = /^\S+/.exec(text);
    to = m ? from + m[0].length : Math.min(from + 1, line.to);
    return {from, to, severity: d.severity, message: d.message};
  });
}

function mount(textarea) {
  const status = document.getElementById(textarea.dataset.status || "");
  const summary = document.getElementById(textarea.dataset.summary || "");
  const kind = textarea.form ? textarea.form.querySelector('[name="kind"]') : null;
  const name = textarea.form ? textarea.form.querySelector('[name="name"]') : null;
  let draftTimer = null, pending = null;
  const draftBody = (src) => ({csrf: csrf(), kind: kind ? kind.value : "", name: name ? name.value : "", src});
  const saveDraft = (src) => {
    clearTimeout(draftTimer);
    pending = src;
    if (status) status.textContent = "Unsaved changes…";
    draftTimer = setTimeout(() => {
      pending = null;
      post("/ui/lot/draft", draftBody(src)).then(r => {
        if (status && pending === null) status.textContent = r.ok ? "Draft saved on the node" : "Draft not saved (" + r.status + ")";
      }).catch(() => { if (status) status.textContent = "Draft not saved: the node does not answer"; });
    }, 600);
  };
  // Leaving the page with a save still waiting: send it on the way out.
  window.addEventListener("pagehide", () => {
    if (pending === null) return;
    clearTimeout(draftTimer);
    navigator.sendBeacon("/ui/lot/draft", new URLSearchParams(draftBody(pending)));
    pending = null;
  });
  const check = linter(async view => {
    const src = view.state.doc.toString();
    try {
      const r = await post("/ui/lot/check", {src});
      if (!r.ok) return [];
      const diags = await r.json();
      if (summary) {
        summary.textContent = diags.length === 0 ? "No problems found." :
          diags.map(d => `Line ${d.line}, column ${d.column}: ${d.severity}: ${d.message}`).join("\n");
        summary.dataset.count = String(diags.length);
      }
      return toRanges(view.state.doc, diags);
    } catch (e) {
      return [];
    }
  }, {delay: 400});
  const view = new EditorView({
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        lineNumbers(), history(), drawSelection(), highlightActiveLine(), bracketMatching(),
        indentUnit.of("    "), lot, syntaxHighlighting(style), theme, check, lintGutter(),
        keymap.of([...defaultKeymap, ...historyKeymap, ...lintKeymap, ...searchKeymap]),
        EditorView.contentAttributes.of({"aria-label": textarea.getAttribute("aria-label") || "LoT source", "id": "lot-code"}),
        EditorView.updateListener.of(u => {
          if (!u.docChanged) return;
          const src = u.state.doc.toString();
          textarea.value = src;
          textarea.dispatchEvent(new Event("input", {bubbles: true}));
          saveDraft(src);
        }),
      ],
    }),
  });
  textarea.hidden = true;
  textarea.insertAdjacentElement("afterend", view.dom);
  if (textarea.form) {
    textarea.form.addEventListener("submit", () => {
      textarea.value = view.state.doc.toString();
      clearTimeout(draftTimer);
      pending = null;
      view.contentDOM.setAttribute("contenteditable", "false"); // no edits while the deploy is in flight
    });
  }
  window.lotEditor = view;
  return view;
}

document.querySelectorAll("textarea[data-lot-editor]").forEach(mount);
