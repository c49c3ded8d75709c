import Router from '@koa/router';
import fs from 'node:fs';
import path from 'node:path';
import type { Middleware } from 'koa';
import send from 'koa-send';
import { presentProviderKinds } from '../core/providers/kinds';
import type { GatewayState } from './context';

/** The checkout's root: the nearest folder up with a package.json (this file runs from api/ or, built, from dist/api/). */
function checkoutRoot(): string {
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
}

/** Where setup writes the console's static build (console/vite.config.ts). */
export const CONSOLE_BUILD_DIR = path.join(checkoutRoot(), 'console', 'dist');
const ONE_YEAR_MS = 365 * 24 * 3600 * 1000;

/**
 * Catalog paths the web console reads. The provider-kind catalog is public product data (no
 * organization's configuration), so it needs no credential.
 */
export function consoleRouter(): Router<GatewayState> {
  const router = new Router<GatewayState>({ prefix: '/console' });
  router.get('/providers/kinds', (ctx) => {
    ctx.body = presentProviderKinds();
  });
  return router;
}

/**
 * The operator console (issue 25), served from its static build under `/console`: hashed
 * assets cached for good, and every other path the single page (its router reads the path). The
 * page holds no secret; it signs in with a management token kept in session storage. The
 * policy headers keep it from being framed or from loading anything but its own files.
 */
export function consoleStatic(root = CONSOLE_BUILD_DIR): Middleware<GatewayState> {
  return async (ctx, next) => {
    if ((ctx.method !== 'GET' && ctx.method !== 'HEAD') || !(ctx.path === '/console' || ctx.path.startsWith('/console/')) || ctx.path.startsWith('/console/providers/')) {
      return next();
    }
    if (!fs.existsSync(path.join(root, 'index.html'))) {
      ctx.status = 503;
      ctx.type = 'text/plain';
      ctx.body = 'The console is not built. Run `npm run build:console` (setup does it on a fresh clone).\n';
      return;
    }
    ctx.set('Content-Security-Policy', "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    const relative = ctx.path.slice('/console'.length);
    if (relative.startsWith('/assets/')) {
      // koa-send refuses paths that leave `root`; a missing asset is a plain 404.
      const sent = await send(ctx, relative, { root, immutable: true, maxage: ONE_YEAR_MS }).catch(() => null);
      if (!sent) ctx.status = 404;
      return;
    }
    ctx.set('Cache-Control', 'no-cache');
    await send(ctx, 'index.html', { root });
  };
}
