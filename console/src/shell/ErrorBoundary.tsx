import { Component, type ReactNode } from 'react';
import { ProblemAlert } from '../components/ProblemAlert';

/** ErrorBoundary shows a view's unexpected error (a failed lazy chunk, a render bug) in place. */
export class ErrorBoundary extends Component<{ children: ReactNode }, { error: unknown }> {
  state = { error: null as unknown };
  static getDerivedStateFromError(error: unknown) {
    return { error };
  }
  render() {
    if (this.state.error) return <ProblemAlert error={this.state.error} title="This view failed" />;
    return this.props.children;
  }
}
