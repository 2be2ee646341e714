import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { MantineProvider, Modal, NavLink, createTheme, type CSSVariablesResolver } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import '@mantine/core/styles.css';
import { App } from './App';
import { ApiProblem } from './api/problem';

// System fonts only: the console makes no request to any other origin.
const theme = createTheme({
  fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif',
  primaryColor: 'indigo',
  // White on indigo.6 is under 4.5:1; shade 8 passes WCAG AA for filled buttons and links.
  primaryShade: 8,
  components: {
    // The dialogs' close button is an icon: give it a name.
    Modal: Modal.extend({ defaultProps: { closeButtonProps: { 'aria-label': 'Close' } } }),
    // The light variant's indigo-on-pale-indigo is under 4.5:1.
    NavLink: NavLink.extend({ defaultProps: { variant: 'filled' } }),
  },
});

// Mantine's default "dimmed" grey (gray.6) is under WCAG AA's 4.5:1 on white: one shade darker.
const resolver: CSSVariablesResolver = (t) => ({
  variables: {},
  light: { '--mantine-color-dimmed': t.colors.gray[7] },
  dark: {},
});

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // A refusal (4xx) will not change by asking again.
      retry: (n, err) => !(err instanceof ApiProblem && err.status < 500) && n < 2,
      refetchOnWindowFocus: false,
    },
  },
});

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <MantineProvider theme={theme} defaultColorScheme="light" cssVariablesResolver={resolver}>
      <QueryClientProvider client={queryClient}>
        <App />
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
