import { flexRender, getCoreRowModel, useReactTable, type ColumnDef } from '@tanstack/react-table';

/** Every table of the console: TanStack Table's row model, rendered as a plain accessible table. */
export function DataTable<T>({ caption, columns, rows, onOpen }: { caption: string; columns: ColumnDef<T, unknown>[]; rows: T[]; onOpen?: (row: T) => void }) {
  const table = useReactTable({ data: rows, columns, getCoreRowModel: getCoreRowModel() });
  return (
    <table className="data">
      <caption>{caption}</caption>
      <thead>
        {table.getHeaderGroups().map((group) => (
          <tr key={group.id}>
            {group.headers.map((header) => <th key={header.id} scope="col">{flexRender(header.column.columnDef.header, header.getContext())}</th>)}
          </tr>
        ))}
      </thead>
      <tbody>
        {table.getRowModel().rows.length === 0 && (
          <tr><td colSpan={columns.length}>Nothing here yet.</td></tr>
        )}
        {table.getRowModel().rows.map((row) => (
          <tr key={row.id} className={onOpen ? 'openable' : undefined}>
            {row.getVisibleCells().map((cell) => <td key={cell.id}>{flexRender(cell.column.columnDef.cell, cell.getContext())}</td>)}
          </tr>
        ))}
      </tbody>
    </table>
  );
}
