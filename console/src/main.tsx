import { StrictMode, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { Link, Route, Router, Switch, useLocation } from 'wouter';
import { session } from './lib/api';
import { Audit } from './pages/Audit';
import { Connections } from './pages/Connections';
import { Costs } from './pages/Costs';
import { Findings } from './pages/Findings';
import { Tools } from './pages/Tools';
import { Webhooks } from './pages/Webhooks';
import { JobDetail, Jobs } from './pages/Jobs';
import { BatchDetail, Batches } from './pages/Batches';
import { Keys } from './pages/Keys';
import { Overview } from './pages/Overview';
import { RequestDetail } from './pages/RequestDetail';
import { Requests } from './pages/Requests';
import { SignIn } from './pages/SignIn';
import { Usage } from './pages/Usage';
import './styles.css';

const PAGES = [['/', 'Overview'], ['/usage', 'Usage'], ['/requests', 'Requests'], ['/findings', 'Findings'], ['/jobs', 'Jobs'], ['/batches', 'Batches'], ['/keys', 'Keys'], ['/connections', 'Connections'], ['/costs', 'Costs'], ['/webhooks', 'Webhooks'], ['/tools', 'Tools'], ['/audit', 'Audit']] as const;

function Shell({ onSignOut }: { onSignOut: () => void }) {
  const [location] = useLocation();
  return (
    <>
      <a className="skip" href="#main">Skip to content</a>
      <header>
        <span className="brand">Gateway console</span>
        <nav aria-label="Pages">
          <ul>
            {PAGES.map(([href, label]) => (
              <li key={href}><Link href={href} aria-current={location === href ? 'page' : undefined}>{label}</Link></li>
            ))}
          </ul>
        </nav>
        <button type="button" onClick={onSignOut}>Sign out</button>
      </header>
      <main id="main">
        <Switch>
          <Route path="/"><Overview /></Route>
          <Route path="/usage"><Usage /></Route>
          <Route path="/requests"><Requests /></Route>
          <Route path="/requests/:id">{(p) => <RequestDetail id={p.id} />}</Route>
          <Route path="/findings"><Findings /></Route>
          <Route path="/jobs"><Jobs /></Route>
          <Route path="/jobs/:id">{(p) => <JobDetail id={p.id} />}</Route>
          <Route path="/batches"><Batches /></Route>
          <Route path="/batches/:id">{(p) => <BatchDetail id={p.id} />}</Route>
          <Route path="/keys"><Keys /></Route>
          <Route path="/connections"><Connections /></Route>
          <Route path="/costs"><Costs /></Route>
          <Route path="/webhooks"><Webhooks /></Route>
          <Route path="/tools"><Tools /></Route>
          <Route path="/audit"><Audit /></Route>
          <Route><p>No such page. <Link href="/">Overview</Link></p></Route>
        </Switch>
      </main>
    </>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(session.token() !== null);
  return (
    <Router base="/console">
      {signedIn ? <Shell onSignOut={() => { session.signOut(); setSignedIn(false); }} /> : <SignIn onSignedIn={() => setSignedIn(true)} />}
    </Router>
  );
}

createRoot(document.getElementById('root')!).render(<StrictMode><App /></StrictMode>);
