/**
 * `npm run replay -- --query "<visibility query>"`: the operator's pre-deploy check (issue 34).
 * Fetches the histories of the workflows the query lists from a running Temporal
 * (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, or the address `npm start` wrote to
 * GW_DATA_DIR/runtime.json) and replays each against the workflow code about to be deployed:
 * `--bundle <file>` (a built dist/workflow-bundle.js), else the workflows/ sources bundled now.
 * Exits 1 naming every run that would not replay (a change that needs `patched()`), 0 when all do.
 *
 *   npm run replay -- --query "ExecutionStatus = 'Running'"
 *   npm run replay -- --query "WorkflowType = 'videoJob' AND ExecutionStatus = 'Running'" --limit 500
 *   npm run replay -- --histories test/replay/histories     (JSON files, as the tests record them)
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { loadConfig } from '../core/config';
import { quietBundlerLogger } from '../workers/queues';
import { bundleGatewayWorkflows, FAILURE_CONVERTER_PATH, installTemporalRuntime, workflowSpanSink } from '../workers/temporal';
import { readDevelopmentSealingKeys, readRuntimeFile } from './lib/runtime-file';
import { sealingWorkerDataConverter } from '../core/crypto/payload-codec';

const say = (line: string) => console.log(`[replay] ${line}`);

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { query: { type: 'string' }, limit: { type: 'string', default: '1000' }, bundle: { type: 'string' }, histories: { type: 'string' } },
  });
  if (!values.query && !values.histories) {
    console.error('[replay] give --query "<visibility query>" (workflows from a running Temporal) or --histories <folder of JSON histories>');
    return 2;
  }
  installTemporalRuntime('error');
  // Payloads are sealed: the replay opens them with the workers' keys (or those `npm start` made).
  const config = loadConfig();
  const keys = config.GW_SEALING_KEYS ?? readDevelopmentSealingKeys(config.dataDir);
  if (!keys) {
    console.error('[replay] no sealing keys to open the payloads with: set GW_SEALING_KEYS as the workers have it');
    return 2;
  }
  const dataConverter = sealingWorkerDataConverter(keys, FAILURE_CONVERTER_PATH);
  let workflowBundle: ReplayWorkerOptions['workflowBundle'];
  if (values.bundle) {
    workflowBundle = { codePath: path.resolve(values.bundle) };
    say(`workflow code: ${values.bundle}`);
  } else {
    say('bundling the workflow code from workflows/ ...');
    workflowBundle = { code: (await bundleGatewayWorkflows(quietBundlerLogger)).code };
  }

  const failures: string[] = [];
  let replayed = 0;
  const record = (id: string, error: unknown) => {
    replayed++;
    if (error) failures.push(`${id}: ${(error as Error).message ?? String(error)}`);
  };

  if (values.histories) {
    const folder = path.resolve(values.histories);
    for (const file of fs.readdirSync(folder).filter((f) => f.endsWith('.json')).sort()) {
      const history = JSON.parse(fs.readFileSync(path.join(folder, file), 'utf8')) as unknown;
      const error = await Worker.runReplayHistory({ workflowBundle, dataConverter, sinks: workflowSpanSink() }, history, file).then(() => null, (err: unknown) => err);
      record(file, error);
    }
  } else {
    const address = config.TEMPORAL_ADDRESS ?? readRuntimeFile(config.dataDir)?.TEMPORAL_ADDRESS;
    if (!address) {
      console.error('[replay] no Temporal to read from: set TEMPORAL_ADDRESS (or run `npm start`, which records its address)');
      return 2;
    }
    const connection = await Connection.connect({ address });
    try {
      const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter });
      say(`reading the histories of \`${values.query}\` from ${address} (namespace ${config.TEMPORAL_NAMESPACE}), at most ${values.limit}`);
      const histories = client.workflow.list({ query: values.query, pageSize: 100 }).intoHistories({ bufferLimit: 10 });
      let seen = 0;
      for await (const result of Worker.runReplayHistories({ workflowBundle, dataConverter, sinks: workflowSpanSink() }, histories)) {
        record(result.workflowId, result.error ?? null);
        if (++seen % 100 === 0) say(`${seen} replayed...`);
        if (seen >= Number(values.limit)) break;
      }
    } finally {
      await connection.close();
    }
  }
  if (failures.length > 0) {
    say(`${failures.length} of ${replayed} runs do not replay against this code; deploying it would break them:`);
    for (const f of failures) console.log(`  ${f}`);
    return 1;
  }
  say(`${replayed} runs replay against this code`);
  return 0;
}

main().then((code) => process.exit(code), (err: Error) => {
  console.error(`[replay] failed: ${err.message}`);
  process.exit(1);
});
