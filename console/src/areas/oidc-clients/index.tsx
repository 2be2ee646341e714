// OIDC clients (project scope): the project's OAuth 2.1 / OpenID Connect clients; register any
// type (web with a secret or private_key_jwt, native, spa) with redirect URIs, grants, scopes,
// skip-consent, PAR and JWKS, and see a secret once; on a client's page rotate the secret and
// disable or enable it.
import { Routes, Route } from 'react-router';
import { ClientList } from './ClientList';
import { ClientPage } from './ClientPage';

export default function OidcClients() {
  return (
    <Routes>
      <Route index element={<ClientList />} />
      <Route path=":clientId" element={<ClientPage />} />
    </Routes>
  );
}
