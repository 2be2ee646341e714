// Service accounts (project scope): the accounts with their keys; create one (scopes picked
// from the spec's permission list, optionally pinned to an environment) and see its key once;
// on an account's page, mint and revoke keys and disable or enable the account.
import { Routes, Route } from 'react-router';
import { AccountList } from './AccountList';
import { AccountPage } from './AccountPage';

export default function ServiceAccounts() {
  return (
    <Routes>
      <Route index element={<AccountList />} />
      <Route path=":accountId" element={<AccountPage />} />
    </Routes>
  );
}
