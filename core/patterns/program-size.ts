/**
 * How many instructions RE2 would compile a pattern into, at most, found without compiling it.
 *
 * RE2's matching cost is its program's size times the input's length, and so is the cost of
 * compiling: `.{0,1000}` is nine characters and two thousand instructions, and a 500-character
 * pattern of them took re2js seconds and hundreds of MB to compile before anything could refuse
 * it. re2js tells the size only after compiling (`programSize()`) and does not export its parser,
 * and no maintained package parses RE2's syntax (the JavaScript regex parsers refuse `(?i)`,
 * `\pL`, `\Q...\E`, `(?P<name>...)`, `[[:alpha:]]`), hence this reading of our own.
 *
 * It reads only the structure that decides the size: groups, alternation, repetition, and where
 * an atom (a rune, a class, an escape) begins and ends, as re2js's parser does. Each construct
 * counts what re2js's compiler emits for it after simplification, rounded up: a rune, a class or
 * an assertion one instruction; a capture two more than its contents; `*` two more, `+` and `?`
 * one more; `x{n,m}` n copies of x and m - n optional ones (one more each); an alternation of k
 * branches k - 1 more; plus the program's fail and match instructions. The parser's factoring
 * of alternations and merging of classes only make the real program smaller, so the count is an
 * upper bound (test/unit/pattern-bounds.test.ts checks it against re2js on generated patterns).
 * An invalid pattern gets a count too; compiling it then fails in re2js's parser, which is cheap.
 */
export function programSizeBound(source: string): number {
  let at = 0;
  /** Instructions the last atom read that a repetition after it does not repeat. */
  let unrepeated = 0;
  const peek = (offset = 0) => source[at + offset];

  /** Index just past the first `close` at or after `from`, or the end. */
  const after = (close: string, from: number) => {
    const i = source.indexOf(close, from);
    return i < 0 ? source.length : i + close.length;
  };

  /** `{n}`, `{n,}` or `{n,m}` at `at`, as re2js reads one (else `{` is a literal). */
  function repeatAt(): { min: number; max: number; end: number } | null {
    const m = /^\{(\d+)(?:(,)(\d*))?\}/.exec(source.slice(at, at + 24));
    if (!m) return null;
    const min = Number(m[1]);
    const max = m[2] === undefined ? min : m[3] === '' ? -1 : Number(m[3]);
    return { min, max, end: at + m[0].length };
  }

  /** Skips an escape at `at` (a backslash) other than `\Q`. */
  function skipEscape(): void {
    const c = peek(1);
    if ((c === 'p' || c === 'P' || c === 'x') && peek(2) === '{') at = after('}', at + 3);
    else if (c === 'p' || c === 'P') at += 3;
    else if (c === 'x') at += 4;
    else at += 2;
  }

  /** A bracketed class at `at`, as re2js's parseClass reads it: one instruction. */
  function skipClass(): void {
    at += 1;
    if (peek() === '^') at += 1;
    let first = true;
    while (at < source.length && (peek() !== ']' || first)) {
      first = false;
      if (source.startsWith('[:', at) && source.indexOf(':]', at + 2) >= 0) at = after(':]', at + 2);
      else if (peek() === '\\') skipEscape();
      else at += String.fromCodePoint(source.codePointAt(at)!).length;
    }
    at += 1;
  }

  /** One atom: its size, or null where there is none (a flag group, the end, `|` or `)`). */
  function atom(): number | null {
    const c = peek();
    if (c === undefined || c === '|' || c === ')') return null;
    if (c === '(') {
      let capture = true;
      if (source.startsWith('(?P<', at) || (source.startsWith('(?<', at) && peek(3) !== '=' && peek(3) !== '!')) {
        at = after('>', at);
      } else if (peek(1) === '?') {
        capture = false;
        at += 2;
        while (at < source.length && /[imsU-]/.test(peek()!)) at += 1;
        // `(?i)` sets flags for what follows and is no atom; `(?i:` opens a group. Anything else
        // (`(?=`, `(?<=`) re2js refuses; read on as a group.
        if (peek() === ')') {
          at += 1;
          return null;
        }
        if (peek() === ':') at += 1;
      } else {
        at += 1;
      }
      const inner = alternation();
      unrepeated = 0;
      if (peek() === ')') at += 1;
      return capture ? inner + 2 : inner;
    }
    if (c === '[') {
      skipClass();
      return 1;
    }
    if (c === '\\' && peek(1) === 'Q') {
      // `\Q...\E` is literal runes; a repetition after it repeats the last one only.
      const end = source.indexOf('\\E', at + 2);
      const runes = [...source.slice(at + 2, end < 0 ? source.length : end)].length;
      at = end < 0 ? source.length : end + 2;
      unrepeated += Math.max(0, runes - 1);
      return 1;
    }
    if (c === '\\') {
      skipEscape();
      return 1;
    }
    at += String.fromCodePoint(source.codePointAt(at)!).length;
    return 1;
  }

  /** The size after the repetitions that follow an atom of `size`. */
  function repeated(size: number): number {
    for (;;) {
      const c = peek();
      if (c === '*') size += 2;
      else if (c === '+' || c === '?') size += 1;
      else if (c === '{') {
        const r = repeatAt();
        if (!r) return size;
        if (r.max === -1) size = r.min === 0 ? size + 2 : r.min * size + 1;
        else size = Math.max(1, r.min * size + (r.max - r.min) * (size + 1));
        at = r.end - 1;
      } else return size;
      at += 1;
      if (peek() === '?') at += 1;
    }
  }

  function concatenation(): number {
    let size = 0;
    for (;;) {
      const start = at;
      unrepeated = 0;
      const one = atom();
      if (one === null) {
        if (at === start) return Math.max(1, size);
        continue;
      }
      size += unrepeated;
      size += repeated(one);
    }
  }

  function alternation(): number {
    let size = concatenation();
    while (peek() === '|') {
      at += 1;
      size += concatenation() + 1;
    }
    return size;
  }

  let size = alternation();
  // An unbalanced `)` (re2js refuses it): read on past it.
  while (at < source.length) {
    at += 1;
    size += alternation();
  }
  // The program's fail and match instructions.
  return size + 2;
}
