// First: it configures zod before any module builds or parses a schema.
import './jitless-zod.ts';
import '@mantine/core/styles.css';
import '@mantine/charts/styles.css';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createRoot } from 'react-dom/client';
import { App } from './App.tsx';
import { BrandedProvider } from './ui/brand.tsx';

const queryClient = new QueryClient({
  defaultOptions: {
    // Money screens must not show a stale balance as current; failures show, they do not loop.
    queries: { retry: false, refetchOnWindowFocus: true, staleTime: 0 },
    mutations: { retry: false },
  },
});

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root');
createRoot(root).render(
  <BrandedProvider>
    <QueryClientProvider client={queryClient}>
      <App />
    </QueryClientProvider>
  </BrandedProvider>,
);
