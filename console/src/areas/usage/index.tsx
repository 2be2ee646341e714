// Usage analytics (project scope): summary figures, the activity chart (7–90 days, per
// environment), the subject directory (search, sort, paging) and a subject's page.
import { Route, Routes } from 'react-router';
import '@mantine/charts/styles.css';
import { Overview } from './Overview';
import { SubjectPage } from './Subject';

export default function Usage() {
  return (
    <Routes>
      <Route index element={<Overview />} />
      <Route path="subjects/:subjectId" element={<SubjectPage />} />
    </Routes>
  );
}
