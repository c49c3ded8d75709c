/** A JSON value folded under a summary, for definitions and matches too long for a cell. */
export function JsonBlock({ summary, value }: { summary: string; value: unknown }) {
  return (
    <details>
      <summary>{summary}</summary>
      <pre>{JSON.stringify(value, null, 2)}</pre>
    </details>
  );
}
