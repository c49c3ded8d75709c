/** A labelled text input per filter of a list, over one draft of the filters (applied on submit). */
export function FilterFields({ prefix, fields, draft, onChange }: {
  prefix: string; fields: ReadonlyArray<readonly [string, string]>; draft: Record<string, string>; onChange: (draft: Record<string, string>) => void;
}) {
  return (
    <>
      {fields.map(([name, label]) => (
        <span key={name}>
          <label htmlFor={`${prefix}-${name}`}>{label}</label>
          <input id={`${prefix}-${name}`} value={draft[name] ?? ''} onChange={(e) => onChange({ ...draft, [name]: e.target.value })} />
        </span>
      ))}
    </>
  );
}
