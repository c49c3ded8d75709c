import { parseArgs } from 'node:util';
import { eq } from 'drizzle-orm';
import { ConfigError, loadConfig } from '../core/config';
import { connectDatabase } from '../core/db/client';
import { applyMigrations } from '../core/db/migrate';
import { MEMBER_ROLES, organizations, PLANS, type MemberRole, type Plan } from '../core/db/schema';
import { issueManagementToken } from '../core/tenancy/management-tokens';
import { addMember, bootstrapOrganization, findOwner } from '../core/tenancy/organizations';
import { readRuntimeFile } from './lib/runtime-file';

const USAGE = `usage:
  gw bootstrap --org NAME [--plan trial|team|business] [--email EMAIL] [--json]
  gw token create --org ORG_ID --scopes a:read,b:write [--role owner|admin|member|viewer] [--projects p1,p2] [--json]
  gw migrate

Reads DATABASE_URL, or the addresses a running \`npm start\` wrote under GW_DATA_DIR.`;

class UsageError extends Error {}

function databaseUrl(): string {
  const config = loadConfig();
  const url = config.DATABASE_URL ?? readRuntimeFile(config.dataDir)?.DATABASE_URL;
  if (!url) throw new ConfigError('DATABASE_URL is not set and no `npm start` is running here');
  return url;
}

function oneOf<T extends string>(value: string | undefined, allowed: readonly T[], flag: string): T | undefined {
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`${flag} must be one of ${allowed.join(', ')}`);
  return value as T;
}

function list(value: string | undefined): string[] | undefined {
  return value?.split(',').map((s) => s.trim()).filter(Boolean);
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      org: { type: 'string' },
      plan: { type: 'string' },
      email: { type: 'string' },
      scopes: { type: 'string' },
      role: { type: 'string' },
      projects: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const command = positionals.join(' ');
  if (values.help || command === '') {
    console.log(USAGE);
    return;
  }

  if (command === 'migrate') {
    await applyMigrations(databaseUrl());
    console.log('migrations applied');
    return;
  }

  if (command !== 'bootstrap' && command !== 'token create') throw new UsageError(`unknown command: ${command}`);
  if (!values.org) throw new UsageError('--org is required');
  const url = databaseUrl();
  await applyMigrations(url);
  const database = connectDatabase(url, { max: 2 });
  try {
    if (command === 'bootstrap') {
      const result = await bootstrapOrganization(database.db, {
        name: values.org,
        plan: oneOf<Plan>(values.plan, PLANS, '--plan'),
        email: values.email,
      });
      if (values.json) console.log(JSON.stringify(result));
      else console.log(`organization ${result.org_id}\nowner member ${result.member_id}\nmanagement token (shown once): ${result.management_token}`);
      return;
    }

    const scopes = list(values.scopes);
    if (!scopes || scopes.length === 0) throw new UsageError('--scopes is required');
    const [org] = await database.db.select({ id: organizations.id }).from(organizations).where(eq(organizations.id, values.org));
    if (!org) throw new UsageError(`no organization ${values.org}`);
    const role = oneOf<MemberRole>(values.role, MEMBER_ROLES, '--role');
    // A role other than the owner's gets a member of its own, whose current role the token follows.
    const memberId = role && role !== 'owner'
      ? await addMember(database.db, org.id, `${role}-${Date.now().toString(36)}@${org.id}.invalid`, role)
      : await findOwner(database.db, org.id);
    if (!memberId) throw new UsageError(`organization ${org.id} has no owner`);
    const issued = await issueManagementToken(database.db, {
      orgId: org.id,
      name: `cli ${scopes.join(',')}`,
      scopes,
      createdByMemberId: memberId,
      projectIds: list(values.projects) ?? null,
    });
    const result = { token_id: issued.id, member_id: memberId, management_token: issued.token };
    if (values.json) console.log(JSON.stringify(result));
    else console.log(`token ${issued.id} (creator ${memberId})\nmanagement token (shown once): ${issued.token}`);
  } finally {
    await database.close();
  }
}

main(process.argv.slice(2)).catch((err: Error) => {
  console.error(`gw: ${err.message}`);
  if (err instanceof UsageError) console.error(USAGE);
  process.exit(err instanceof UsageError ? 2 : 1);
});
