// Webhook endpoints (project scope): list and create (the signing secret shown once), and an
// endpoint's page: edit, disable/enable, rotate the secret, send a test, deliveries with
// redeliver.
import { Route, Routes } from 'react-router';
import { Endpoints } from './Endpoints';
import { EndpointPage } from './Endpoint';

export default function Webhooks() {
  return (
    <Routes>
      <Route index element={<Endpoints />} />
      <Route path=":endpointId" element={<EndpointPage />} />
    </Routes>
  );
}
