import { useState, type FormEvent } from 'react';
import { api, ApiError, session } from '../lib/api';

/** Sign in with a management token; it stays in this tab's session storage only. */
export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    session.signIn(token.trim());
    try {
      await api('GET', '/organization');
      onSignedIn();
    } catch (err) {
      // A valid token without `organization:read` still signs in: each page says what it may not read.
      if (err instanceof ApiError && err.status === 403) return onSignedIn();
      session.signOut();
      setError(err instanceof ApiError && err.status === 401 ? 'That token was not accepted.' : (err as Error).message);
    }
  };
  return (
    <main className="sign-in">
      <h1>Gateway console</h1>
      <form onSubmit={submit}>
        <label htmlFor="token">Management token</label>
        <input id="token" name="token" type="password" autoComplete="off" value={token} onChange={(e) => setToken(e.target.value)} required />
        <button type="submit">Sign in</button>
        {error && <p role="alert" className="error">{error}</p>}
      </form>
      <p className="hint">The token is kept in this tab's session storage and sent only to this gateway's management API.</p>
    </main>
  );
}
