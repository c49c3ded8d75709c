import fs from 'node:fs';
import path from 'node:path';

/**
 * Where `npm start` writes the addresses of what it started, so `gw` in another terminal
 * reaches the same embedded database without the user copying URLs around.
 */
export type RuntimeAddresses = { DATABASE_URL: string; REDIS_URL: string; TEMPORAL_ADDRESS: string; API_URL: string };

export function runtimeFilePath(dataDir: string): string {
  return path.join(dataDir, 'runtime.json');
}

export function writeRuntimeFile(dataDir: string, addresses: RuntimeAddresses): void {
  fs.writeFileSync(runtimeFilePath(dataDir), JSON.stringify(addresses, null, 2));
}

export function readRuntimeFile(dataDir: string): RuntimeAddresses | null {
  try {
    return JSON.parse(fs.readFileSync(runtimeFilePath(dataDir), 'utf8')) as RuntimeAddresses;
  } catch {
    return null;
  }
}

export function removeRuntimeFile(dataDir: string): void {
  fs.rmSync(runtimeFilePath(dataDir), { force: true });
}

/** The sealing keys `npm start` generated for development (GW_DATA_DIR/sealing-keys), when it has. */
export function developmentSealingKeysFile(dataDir: string): string {
  return path.join(dataDir, 'sealing-keys');
}

export function readDevelopmentSealingKeys(dataDir: string): string | null {
  try {
    return fs.readFileSync(developmentSealingKeysFile(dataDir), 'utf8').trim() || null;
  } catch {
    return null;
  }
}
