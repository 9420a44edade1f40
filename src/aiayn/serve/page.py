"""The web page at ``/``: choose a language pair, type a sentence, see its translation with
the model's confidence in each of its sentences (an underline from red, unsure, to green,
sure; the value on hover and, for screen readers and at a glance, in the line under the
translation), and under it the encoder–decoder attention of that translation (plain HTML
and a little JavaScript, no build step). ``/?q=...`` translates
on load, which the browser test uses; ``&source=..&target=..`` chooses the pair (the first
served one otherwise).

``__PAIRS__`` is replaced by an ``<option value="SOURCE TARGET">`` per served pair."""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>aiayn translate</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto;
         padding: 0 1rem; }
  textarea { width: 100%; height: 5rem; font: inherit; padding: .5rem; box-sizing: border-box; }
  button { font: inherit; padding: .4rem 1.2rem; margin: .5rem 0; }
  #translation { font-size: 1.25rem; min-height: 2rem; padding: .5rem; background: #f3f6fa;
                white-space: pre-wrap; }
  #error { color: #b00020; }
  img { max-width: 100%; margin-top: 1rem; }
  small { color: #555; }
  .sentence { text-decoration: underline 2px; text-underline-offset: .25em; }
</style>
</head>
<body>
<h1>aiayn</h1>
<p><select id="pair" aria-label="language pair">__PAIRS__</select>
<small>The picture shows what each output word attended to in the input
(encoder&ndash;decoder attention, every layer and head).</small></p>
<textarea id="source"
  placeholder="Type a sentence (Enter translates, Shift+Enter starts a new line)"></textarea>
<div><input id="key" placeholder="API key (if the server needs one)" size="30">
<button id="go">Translate</button></div>
<div id="translation" aria-describedby="confidence"></div>
<small id="confidence"></small>
<div id="error"></div>
<small id="drawing" role="status"></small>
<img id="attention" alt="">
<script>
const source = document.getElementById("source");
const out = document.getElementById("translation");
const error = document.getElementById("error");
const picture = document.getElementById("attention");
const sure = document.getElementById("confidence");
const drawing = document.getElementById("drawing");
const pair = document.getElementById("pair");
const asked = new URLSearchParams(location.search);
const askedPair = `${asked.get("source")} ${asked.get("target")}`;
if ([...pair.options].some((option) => option.value === askedPair)) pair.value = askedPair;

function languages() {
  const [source, target] = pair.value.split(" ");
  return {source: source, target: target};
}

// The translation, each sentence underlined in the colour of its confidence (hue 0, red,
// at 0 to 120, green, at 1) with the value as its tooltip; the text between the sentences
// (the source's spacing and line breaks) as it is.
function showSentences(text, sentences) {
  out.replaceChildren();
  let at = 0;
  for (const part of sentences) {
    const start = part.text ? text.indexOf(part.text, at) : -1;
    if (start < 0) continue;
    out.append(text.slice(at, start));
    const span = document.createElement("span");
    span.className = "sentence";
    span.textContent = part.text;
    span.title = `confidence ${part.confidence.toFixed(2)}`;
    span.style.textDecorationColor = `hsl(${Math.round(120 * part.confidence)} 70% 40%)`;
    out.append(span);
    at = start + part.text.length;
  }
  out.append(text.slice(at));
}

async function translate() {
  const q = source.value.trim();
  if (!q) return;
  error.textContent = "";
  out.textContent = "…";
  sure.textContent = "";
  picture.removeAttribute("src");  // the last translation's picture is not this one's
  picture.alt = "";
  const key = document.getElementById("key").value;
  const body = {q: q, ...languages()};
  if (key) body.api_key = key;
  const response = await fetch("translate", {method: "POST",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  const answer = await response.json();
  if (!response.ok) { out.textContent = ""; error.textContent = answer.error; return; }
  showSentences(answer.translatedText, answer.sentences);
  const each = answer.sentences.map((part) => part.confidence.toFixed(2));
  sure.textContent = `confidence ${answer.confidence.toFixed(2)}` +
    (each.length > 1 ? ` (by sentence: ${each.join(", ")}; hover one for its own)` : "") +
    (answer.flagged ? ": below the minimum, the source is shown" : "");
  const params = new URLSearchParams({q: q, translation: answer.translatedText,
    ...languages()});
  if (key) params.set("api_key", key);
  drawing.textContent = "Drawing the attention picture (it takes a few seconds)…";
  const png = await fetch("attention.png?" + params);
  if (png.ok) {
    picture.src = URL.createObjectURL(await png.blob());
    picture.alt = "encoder-decoder attention";
    drawing.textContent = "";
  } else {
    drawing.textContent = `The attention picture could not be drawn (${png.status}).`;
  }
}

document.getElementById("go").addEventListener("click", translate);
source.addEventListener("keydown", (event) => {  // Enter translates, Shift+Enter breaks the line
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    translate();
  }
});
const given = asked.get("q");
if (given) { source.value = given; translate(); }
</script>
</body>
</html>
"""
