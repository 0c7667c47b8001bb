/**
 * The line of the first JSON syntax error, found without the parser's message: the longest prefix
 * of whole lines that can still be completed to valid JSON by closing what is open.
 */
export function jsonErrorLine(text: string): number {
  const lines = text.split("\n");
  let good = 0;
  for (let n = 1; n <= lines.length; n++) {
    if (!completable(lines.slice(0, n).join("\n"))) break;
    good = n;
  }
  return Math.min(good + 1, lines.length);
}

/** Can `prefix` be the start of a JSON document? Closes open strings and brackets, then parses. */
function completable(prefix: string): boolean {
  const stack: string[] = [];
  let inString = false;
  for (let i = 0; i < prefix.length; i++) {
    const ch = prefix[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === "{") stack.push("}");
    else if (ch === "[") stack.push("]");
    else if (ch === "}" || ch === "]") stack.pop();
  }
  let candidate = prefix.trimEnd();
  if (inString) candidate += '"';
  // a dangling comma, colon or key is completed the simplest way
  candidate = candidate.replace(/,\s*$/, "");
  if (/:\s*$/.test(candidate)) candidate += "null";
  // a string last inside an object is a key waiting for its value
  else if (stack.at(-1) === "}" && /[{,]\s*"(?:[^"\\]|\\.)*"\s*$/.test(candidate)) candidate += ":null";
  candidate += stack.reverse().join("");
  if (candidate.trim() === "") return true;
  try {
    JSON.parse(candidate);
    return true;
  } catch {
    return false;
  }
}
