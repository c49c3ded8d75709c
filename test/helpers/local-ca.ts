import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export type LocalCa = { caFile: string; key: Buffer; cert: Buffer };

/**
 * A throwaway certificate authority and a server certificate it signed for 127.0.0.1 and
 * localhost, made with the machine's openssl. Processes that should trust it get
 * `NODE_EXTRA_CA_CERTS=<caFile>`, the same way an operator adds a private CA.
 */
export function createLocalCa(): LocalCa {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-ca-'));
  const at = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=gw test CA', '-keyout', at('ca.key'), '-out', at('ca.pem'),
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', at('server.key'), '-out', at('server.csr'));
  fs.writeFileSync(at('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  openssl('x509', '-req', '-in', at('server.csr'), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', at('server.ext'), '-out', at('server.pem'));
  return { caFile: at('ca.pem'), key: fs.readFileSync(at('server.key')), cert: fs.readFileSync(at('server.pem')) };
}
